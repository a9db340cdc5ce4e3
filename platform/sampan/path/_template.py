"""The Jinja2 template of ``report.html`` (kept in a module so it ships with any install)."""

REPORT_HTML = """<!DOCTYPE html>
<html lang="{{ t.html_lang }}">
<head>
<meta charset="utf-8">
<title>{{ t.title }}</title>
<style>
  body { font-family: system-ui, -apple-system, "Segoe UI", "Noto Sans", sans-serif; margin: 2rem; color: #1d2733; }
  h1 { font-size: 1.5rem; margin-bottom: .25rem; }
  .meta { color: #5b6775; margin-bottom: 1.5rem; }
  table { border-collapse: collapse; width: 100%; margin-bottom: 1.5rem; }
  th, td { text-align: left; padding: .45rem .6rem; border-bottom: 1px solid #dde3ea; vertical-align: top; }
  th { background: #f3f6f9; }
  .status { font-weight: 600; border-radius: .3rem; padding: .1rem .45rem; }
  .passed { background: #dcf5e3; color: #17652f; }
  .failed { background: #fde2e1; color: #a11d17; }
  .skipped, .not_run { background: #eef0f3; color: #5b6775; }
  .bad { color: #a11d17; font-weight: 600; }
  pre { background: #f7f7f9; padding: .75rem; overflow-x: auto; font-size: .85rem; }
  .summary span { margin-right: 1rem; }
  section.failure { border-left: 4px solid #a11d17; padding-left: 1rem; margin-bottom: 1.5rem; }
  /* the page's own line height and code font: the path_report dashboard shows this page inside a widget, whose
     surroundings set a 28 px line height and a proportional font */
  .sampan-report-page { line-height: 1.45; }
  .sampan-report-page pre, .sampan-report-page code {
    font-family: ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", "Noto Sans Mono", monospace; }
  .sampan-report-page pre { line-height: 1.35; white-space: pre; padding: .75rem; margin: .5rem 0; }
</style>
</head>
<body>
<main class="sampan-report-page">
<h1>{{ t.heading }} &mdash; {{ t[r.mode] }}</h1>
<div class="meta">
  {{ t.run_folder }} <code>{{ r.run_dir }}</code>{{ t.comma }}{{ t.started }} {{ r.started | when }}{% if r.finished %}{{ t.comma }}{{ t.finished }} {{ r.finished | when }}{% set time = took(r.started, r.finished, t.units) %}{% if time %}{{ t.comma }}{{ t.took.format(time=time) }}{% endif %}{% endif %}{{ t.stop }}
  {{ t.parameters }} {% for k, v in r.parameters.items() %}<code>{{ k }}={{ v }}</code> {% endfor %}
</div>
{% if r.get("interrupted") %}<p class="bad" id="interrupted">{{ t.interrupted_run }}</p>{% endif %}
<p class="summary" id="summary">
  <span class="status passed">{{ r.summary.passed }} {{ t.passed }}</span>
  <span class="status failed">{{ r.summary.failed }} {{ t.failed }}</span>
  <span class="status skipped">{{ r.summary.skipped }} {{ t.skipped }}</span>
  <span class="status not_run">{{ r.summary.not_run }} {{ t.not_run }}</span>
</p>
<table id="lessons">
  <thead><tr><th>{{ t.col_stage }}</th><th>{{ t.col_lesson }}</th><th>{{ t.col_status }}</th><th>{{ t.col_duration }}</th><th>{{ t.col_metrics }}</th><th>{{ t.col_notes }}</th></tr></thead>
  <tbody>
  {% for l in r.lessons %}
  <tr data-lesson="{{ l.lesson }}" data-status="{{ l.status }}">
    <td>{{ l.get("stage_title") or l.stage }}</td>
    <td><strong>{{ l.title }}</strong><br><code>{{ l.notebook }}</code>
      {% if not links and l.output %}<br>{{ t.executed }}{{ t.colon }}<code class="output">{{ l.output }}</code>{% elif l.output | relative_link %}<br><a href="{{ l.output | relative_link }}">{{ t.executed }}</a>{% endif %}</td>
    <td><span class="status {{ l.status }}">{{ t[l.status] }}</span></td>
    <td>{% if l.duration_s %}{{ "%.1f"|format(l.duration_s) }} s{% else %}&mdash;{% endif %}</td>
    <td>{% for m in l.metrics %}
      <div class="{{ '' if m.ok else 'bad' }}">{{ m.name }} = {{ m.value|num }}
        <small>{% if m.expect is not none %}{{ t.expected }} {{ m.expect|lower }}{% else %}[{{ m.low|bound }}, {{ m.high|bound }}]{% endif %}</small>{% if m.problem %} &mdash; {{ m.problem }}{% endif %}</div>
      {% else %}&mdash;{% endfor %}</td>
    <td>{{ l.reason }}</td>
  </tr>
  {% endfor %}
  </tbody>
</table>
{% for l in r.lessons if l.error %}
<section class="failure" id="failure-{{ l.lesson }}">
  <h2>{{ l.title or l.lesson }} {{ t.failed }}{% if l.error.cell_index is not none %}{{ t.in_cell }} {{ l.error.cell_index }}{% endif %}{% if l.error.execution_count %} (In [{{ l.error.execution_count }}]){% endif %}</h2>
  <p><strong>{{ l.error.ename }}</strong>: {{ l.error.evalue }}</p>
  {% if l.error.source %}<p>{{ t.cell_source }}</p><pre>{{ l.error.source }}</pre>{% endif %}
  {% if l.error.traceback %}<details><summary>{{ t.traceback }}</summary><pre>{{ l.error.traceback }}</pre></details>{% endif %}
</section>
{% endfor %}
</main>
</body>
</html>
"""
