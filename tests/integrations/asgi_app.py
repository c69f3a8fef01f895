"""The FastAPI app of test_asgi.py: while this replica leads, its background work appends
"pid fence time" to $ME_TEST_DIR/beats.log every 50 ms (after checking it still leads)."""

import asyncio
import os
import time

from fastapi import FastAPI
from mongoelector.asgi import leader_lifespan

OUT = os.path.join(os.environ["ME_TEST_DIR"], "beats.log")


async def heartbeat(fence: int) -> None:
    while True:
        # is_leader is read from the lease's deadline on the monotonic clock: false from
        # the moment this replica may have been replaced, even before the cancel arrives.
        if app.state.mongoelector.elector.is_leader:
            with open(OUT, "a") as f:
                f.write(f"{os.getpid()} {fence} {time.time():.3f}\n")
        await asyncio.sleep(0.05)


app = FastAPI(
    lifespan=leader_lifespan(
        os.environ["ME_TEST_DB"], "asgi-test", heartbeat, ttl=float(os.environ.get("ME_TTL", "2"))
    )
)


@app.get("/leader")
async def leader() -> dict:
    elector = app.state.mongoelector.elector
    return {"pid": os.getpid(), "leading": elector.is_leader, "fence": elector.fence}
