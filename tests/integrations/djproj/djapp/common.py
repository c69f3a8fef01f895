import os
import time


def barrier() -> None:
    """Waits for the test to release every process at once."""
    go = os.path.join(os.environ["ME_TEST_DIR"], "go")
    while not os.path.exists(go):
        time.sleep(0.01)


def record(name: str, fence: object) -> None:
    with open(os.path.join(os.environ["ME_TEST_DIR"], "runs.log"), "a") as f:
        f.write(f"{name} {time.time():.3f} {fence} {os.getpid()}\n")
