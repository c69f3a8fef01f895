"""Sends itest.exclusive tasks from the test process (the same app as the workers')."""

import os
from typing import Callable, List


def send_exclusive(
    test_dir: str, db: str, count: int, seconds: float
) -> Callable[[], List[object]]:
    os.environ["ME_TEST_DIR"] = test_dir
    os.environ["ME_TEST_DB"] = db
    import celery_app

    for _ in range(count):
        celery_app.exclusive.delay(seconds)
    done = os.path.join(test_dir, "exclusive.done")

    def results() -> List[object]:
        if not os.path.exists(done):
            return []
        with open(done) as f:
            return f.read().split()

    return results
