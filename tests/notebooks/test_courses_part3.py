"""Part 3 of the lessons that tests/notebooks/test_courses.py runs twice each (solutions, starter code): a file of
its own so that ``pytest -n N --dist loadfile`` (``make test``) spreads the lessons over the workers."""
import test_courses as courses

test_lesson_runs_and_meets_its_ranges, test_the_untouched_starter_code_passes_no_exercise = courses.part_tests(3)
