"""Running the environment-check lesson's first cells in JupyterLab as a learner does, for the tests that take
README's pictures (docs/images/lab-lesson.png, lab-zh.png)."""
from __future__ import annotations


def run_the_check(page, *, idle: str, first_item: str, ready: str, wait: int):
    """Waits for the lesson's kernel (the status bar says ``idle``), runs its first cells with Shift+Enter from the
    parameters cell (parameters, imports, the section's heading, the check, its items), waits until the check's
    table and its items' lines both show ``first_item`` and the report ends with ``ready``, and scrolls the check's
    cell to the top. Returns the lesson's panel."""
    page.locator(".jp-StatusBar-Widget", has_text=idle).first.wait_for(timeout=wait)
    lesson = page.locator(".jp-NotebookPanel:visible")  # the index stays open in a hidden tab
    lesson.locator(".jp-CodeCell").first.locator(".jp-InputPrompt").click(timeout=wait)
    for _ in range(5):
        page.keyboard.press("Shift+Enter")
    items = lesson.locator(".jp-OutputArea-output", has_text=first_item)
    items.nth(1).wait_for(timeout=wait)
    assert items.count() == 2, items.all_inner_texts()
    assert lesson.locator(".jp-OutputArea-output", has_text=ready).count() == 1
    lesson.locator(".jp-CodeCell", has_text="run_check").first.evaluate(
        "cell => cell.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)
    return lesson
