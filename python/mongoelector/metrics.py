"""Metrics of this process's locks and electors: counters and histograms kept by the
native core, read as a snapshot, and adapters for Prometheus and OpenTelemetry.

Nothing here imports ``prometheus_client`` or ``opentelemetry`` until you use the
adapter that needs it (extras: ``pip install mongoelector[prometheus]`` /
``mongoelector[opentelemetry]``)::

    from prometheus_client import REGISTRY, start_http_server
    from mongoelector.metrics import PrometheusCollector
    REGISTRY.register(PrometheusCollector())
    start_http_server(9100)

The counters are process-wide (every locker, elector and lease of the process, whichever
transport) and only grow; the clock gauges follow the last server-time sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Tuple

from . import _native

if TYPE_CHECKING:  # pragma: no cover
    from opentelemetry.metrics import Meter, MeterProvider

__all__ = ["Stats", "snapshot", "PrometheusCollector", "instrument_opentelemetry"]

#: Acquire outcomes counted by ``Stats.acquires``.
OUTCOMES = ("acquired", "held", "timeout", "cancelled", "error")


@dataclass(frozen=True)
class Stats:
    """One snapshot of the native counters (see the module docstring)."""

    acquires: Dict[str, int]
    """Acquire calls by outcome: acquired, held (non-blocking, lock taken), timeout,
    cancelled, error (the server failed). Argument errors are not counted."""
    acquire_latency_bounds: Tuple[float, ...]
    """Upper bounds (seconds) of the latency buckets; the last bucket is unbounded."""
    acquire_latency_buckets: Tuple[int, ...]
    """Acquire calls per latency bucket (not cumulative), one more than the bounds."""
    acquire_latency_count: int
    acquire_latency_sum: float
    renewals: int
    """Renewals of held locks (electors, leases, touch())."""
    renewal_failures: int
    """Renewals that failed or found the hold gone."""
    leader_elected: int
    leader_lost: int
    step_downs: int
    """Leaders that stepped down before their lease could expire (cut off, clock jump)."""
    clock_samples: int
    clock_offset: float
    """Server minus host clock at the last sample, seconds."""
    clock_uncertainty: float
    """Half the round trip of the last sample, seconds."""
    round_trips: int
    """Commands sent to a server by the native transports (SQLite: transactions)."""
    extra: Dict[str, Any] = field(default_factory=dict)


def snapshot() -> Stats:
    """The current counters."""
    d = _native.metrics_snapshot()
    return Stats(
        acquires={k: int(v) for k, v in d["acquires"].items()},
        acquire_latency_bounds=tuple(float(b) for b in d["acquire_latency_bounds"]),
        acquire_latency_buckets=tuple(int(n) for n in d["acquire_latency_buckets"]),
        acquire_latency_count=int(d["acquire_latency_count"]),
        acquire_latency_sum=float(d["acquire_latency_sum"]),
        renewals=int(d["renewals"]),
        renewal_failures=int(d["renewal_failures"]),
        leader_elected=int(d["leader_elected"]),
        leader_lost=int(d["leader_lost"]),
        step_downs=int(d["step_downs"]),
        clock_samples=int(d["clock_samples"]),
        clock_offset=float(d["clock_offset"]),
        clock_uncertainty=float(d["clock_uncertainty"]),
        round_trips=int(d["round_trips"]),
    )


def _cumulative(stats: Stats) -> List[Tuple[str, float]]:
    """Prometheus-style cumulative buckets: (le, count) with le "+Inf" last."""
    out: List[Tuple[str, float]] = []
    total = 0
    for bound, n in zip(
        stats.acquire_latency_bounds + (float("inf"),), stats.acquire_latency_buckets
    ):
        total += n
        out.append(("+Inf" if bound == float("inf") else repr(bound), float(total)))
    return out


class PrometheusCollector:
    """A ``prometheus_client`` custom collector exposing the snapshot as
    ``mongoelector_*`` metrics. Register it once: ``REGISTRY.register(PrometheusCollector())``.
    Imports ``prometheus_client`` when collected, not before."""

    def __init__(self, namespace: str = "mongoelector") -> None:
        self.namespace = namespace

    def describe(self) -> List[Any]:
        # Lets the registry check names at registration without collecting twice.
        return list(self.collect())

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        s = snapshot()
        ns = self.namespace
        acquires = CounterMetricFamily(
            f"{ns}_acquires", "Acquire calls by outcome.", labels=["outcome"]
        )
        for outcome in OUTCOMES:
            acquires.add_metric([outcome], s.acquires.get(outcome, 0))
        yield acquires
        yield HistogramMetricFamily(
            f"{ns}_acquire_duration_seconds",
            "Time an acquire call took, whatever its outcome.",
            buckets=_cumulative(s),
            sum_value=s.acquire_latency_sum,
        )
        for name, value, doc in (
            ("renewals", s.renewals, "Renewals of held locks (electors, leases, touch)."),
            (
                "renewal_failures",
                s.renewal_failures,
                "Renewals that failed or found the hold gone.",
            ),
            ("leader_elected", s.leader_elected, "Leaderships gained."),
            ("leader_lost", s.leader_lost, "Leaderships ended."),
            (
                "step_downs",
                s.step_downs,
                "Leaders that stepped down before their lease could expire.",
            ),
            ("clock_samples", s.clock_samples, "Server clock samples taken."),
            ("round_trips", s.round_trips, "Commands sent by the native transports."),
        ):
            yield CounterMetricFamily(f"{ns}_{name}", doc, value=value)
        yield GaugeMetricFamily(
            f"{ns}_clock_offset_seconds",
            "Server minus host clock at the last sample.",
            value=s.clock_offset,
        )
        yield GaugeMetricFamily(
            f"{ns}_clock_uncertainty_seconds",
            "Half the round trip of the last server clock sample.",
            value=s.clock_uncertainty,
        )


def instrument_opentelemetry(
    meter_provider: Optional["MeterProvider"] = None, meter: Optional["Meter"] = None
) -> "Meter":
    """Registers observable instruments (``mongoelector.*``) that read the snapshot at each
    collection. Uses `meter`, else one from `meter_provider`, else the global provider.
    Imports ``opentelemetry`` here, not before. Returns the meter used."""
    from opentelemetry import metrics as otel
    from opentelemetry.metrics import CallbackOptions, Observation

    if meter is None:
        provider = meter_provider if meter_provider is not None else otel.get_meter_provider()
        meter = provider.get_meter("mongoelector")

    def counter(read: Any) -> Any:
        def callback(options: CallbackOptions) -> List[Observation]:
            return [Observation(read(snapshot()))]

        return [callback]

    def per_outcome(options: CallbackOptions) -> List[Observation]:
        s = snapshot()
        return [Observation(s.acquires.get(o, 0), {"outcome": o}) for o in OUTCOMES]

    meter.create_observable_counter(
        "mongoelector.acquires", [per_outcome], description="Acquire calls by outcome."
    )
    meter.create_observable_counter(
        "mongoelector.acquire.duration_sum",
        counter(lambda s: s.acquire_latency_sum),
        unit="s",
        description="Total time acquire calls took.",
    )
    for name in (
        "renewals",
        "renewal_failures",
        "leader_elected",
        "leader_lost",
        "step_downs",
        "round_trips",
    ):
        meter.create_observable_counter(
            f"mongoelector.{name}", counter(lambda s, n=name: getattr(s, n))
        )
    meter.create_observable_gauge(
        "mongoelector.clock.offset", counter(lambda s: s.clock_offset), unit="s"
    )
    meter.create_observable_gauge(
        "mongoelector.clock.uncertainty", counter(lambda s: s.clock_uncertainty), unit="s"
    )
    return meter
