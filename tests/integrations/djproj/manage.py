"""The Django project of test_django.py (settings from the environment: ME_TEST_DIR, ME_TEST_DB)."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djproj_settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
