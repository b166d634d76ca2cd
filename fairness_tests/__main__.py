"""``python -m fairness_tests``: the ``fairness-tests`` command."""
import sys

from fairness_tests.cli.main import main

sys.exit(main())
