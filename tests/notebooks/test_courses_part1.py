"""Part 1 of the lessons that tests/notebooks/test_courses.py runs twice each (solutions, starter code): a file of
its own so that ``pytest -n N --dist loadfile`` (``make test``) spreads the lessons over the workers."""
from __future__ import annotations

import pytest

import test_courses as courses


@pytest.mark.notebook
@pytest.mark.parametrize("lesson_id", courses.lesson_part(1))
def test_lesson_runs_and_meets_its_ranges(lesson_id):
    courses.check_lesson_ranges(lesson_id)


@pytest.mark.notebook
@pytest.mark.parametrize("lesson_id", courses.lesson_part(1))
def test_the_untouched_starter_code_passes_no_exercise(lesson_id):
    courses.check_starter_code(lesson_id)
