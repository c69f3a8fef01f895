import os

SECRET_KEY = "test-only"
USE_TZ = True
INSTALLED_APPS = ["djapp", "django_cron"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.path.join(os.environ["ME_TEST_DIR"], "django.sqlite3"),
        "OPTIONS": {"timeout": 30},
    }
}
MONGOELECTOR_URL = os.environ["ME_TEST_DB"]
CRON_CLASSES = ["djapp.cron.Report"]
DJANGO_CRON_LOCK_BACKEND = "mongoelector.django.CronJobLock"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
