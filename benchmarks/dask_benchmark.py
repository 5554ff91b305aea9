"""``bertprep run`` on a local Dask cluster against the multi-process DirectRunner, side by side.

    .venv/bin/python -m benchmarks.dask_benchmark --megabytes 25 100 [--workers 2] [--keep]

For each size, the synthetic JSONL corpus and the config of ``benchmarks.run_benchmark`` (near
dedup, Google's uncased vocab, 1% eval, seq128/20 dupe 3 + seq512/80 dupe 1, 64 + 4 shards each)
run twice, one after the other in this process:

- ``direct``: ``bertprep run --direct_running_mode=multi_processing --direct_num_workers=N``;
  wall time and peak RSS of its whole process tree (launcher + Beam workers, sampled every 0.1 s).
- ``dask``: a ``dask scheduler`` and ``dask worker --nworkers N --nthreads 1 --memory-limit M``
  started as their own processes on 127.0.0.1 (a real cluster, as one would start it on Slurm),
  then ``bertprep run --runner DaskRunner --dask_client_address 127.0.0.1:PORT``; wall time of the
  launcher, and peak RSS of the launcher's tree, the scheduler, each worker process and of
  everything together (all sampled in the same pass, every 0.1 s). Cluster start-up is not in the
  wall time (a cluster outlives jobs). From the scheduler's task stream: the workers' seconds per
  action (compute, transfer, deserialize), the largest task kinds, and their idle seconds.

Both runs' shards are compared by ``content_sha256`` (they must be equal). Prints Markdown rows
for benchmarks/RESULTS.md and appends every figure to benchmarks/work/dask_benchmark-<date>.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.process_tree import _rss_bytes, bertprep_command, tree_rss_bytes
from benchmarks.run_benchmark import WORK, environment, write_config
from benchmarks.synthetic_corpus import build_corpus

MB = 2**20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shard_hashes(out: Path) -> dict[str, list[str]]:
    return {
        str(m.relative_to(out)): [s["content_sha256"] for s in json.loads(m.read_text())["shards"]]
        for m in sorted(out.glob("seq*/*/manifest.json"))
    }


class Cluster:
    """A scheduler and one ``dask worker`` command (N worker processes under nannies)."""

    def __init__(self, workers: int, memory_limit: str, env: dict) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        dask = str(Path(sys.executable).parent / "dask")
        self.log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed by close())
        common = dict(stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd="/")
        self.scheduler = subprocess.Popen(
            [
                dask,
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--no-dashboard",
            ],  # fmt: skip
            **common,
        )
        time.sleep(2)
        self.worker = subprocess.Popen(
            [
                dask,
                "worker",
                f"tcp://{self.address}",
                "--nworkers",
                str(workers),
                "--nthreads",
                "1",
                "--memory-limit",
                memory_limit,
                "--no-dashboard",
            ],  # fmt: skip
            **common,
        )
        from distributed import Client

        with Client(self.address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)

    def worker_pids(self) -> list[int]:
        """The worker processes' pids, as the workers themselves report them."""
        import os

        from distributed import Client

        with Client(self.address, timeout=60) as client:
            return sorted(client.run(os.getpid).values())

    def start_task_stream(self) -> float:
        """Installs the scheduler's task-stream plugin; returns the epoch time to read from."""
        from distributed import Client

        with Client(self.address, timeout=60) as client:
            client.get_task_stream()
        return time.time()

    def task_time(self, since: float, wall_s: float, workers: int) -> dict:
        """Where the workers' time went since ``since``: seconds per task action (compute,
        transfer, deserialize, ...), the compute seconds of the largest task kinds, and the
        workers' idle seconds (workers × wall − all actions)."""
        from distributed import Client
        from distributed.utils import key_split

        with Client(self.address, timeout=60) as client:
            records = client.get_task_stream(start=since)
        actions: dict[str, float] = {}
        kinds: dict[str, float] = {}
        for record in records:
            for span in record["startstops"]:
                seconds = span["stop"] - span["start"]
                actions[span["action"]] = actions.get(span["action"], 0.0) + seconds
                if span["action"] == "compute":
                    kind = key_split(record["key"])
                    kinds[kind] = kinds.get(kind, 0.0) + seconds
        busy = sum(actions.values())
        top = sorted(kinds.items(), key=lambda kv: -kv[1])[:6]
        return {
            "tasks": len(records),
            "actions_s": {k: round(v, 1) for k, v in sorted(actions.items())},
            "compute_by_kind_s": {k: round(v, 1) for k, v in top},
            "idle_s": round(workers * wall_s - busy, 1),
        }

    def close(self) -> None:
        for proc in (self.worker, self.scheduler):
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.log.close()


def run_sampled(cmd: list[str], env: dict, sample: Callable[[int], dict[str, int]], name: str):
    """Runs ``cmd`` to the end, calling ``sample(launcher_pid)`` every 0.1 s; returns the wall
    seconds and the peak of each figure ``sample`` returns. Exits with the log if it fails."""
    peaks: dict[str, int] = {}
    with tempfile.TemporaryFile(mode="w+") as log:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, text=True)
        while proc.poll() is None:
            for k, v in sample(proc.pid).items():
                peaks[k] = max(peaks.get(k, 0), v)
            time.sleep(0.1)
        wall = time.monotonic() - start
        log.seek(0)
        output = log.read()
    if proc.returncode:
        raise SystemExit(f"{name} run failed:\n{output[-4000:]}")
    return wall, peaks


def run_direct(cmd: list[str], workers: int, env: dict) -> dict:
    cmd = [*cmd, "--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"]
    wall, peaks = run_sampled(cmd, env, lambda pid: {"all": tree_rss_bytes(pid)}, "direct")
    return {
        "command": " ".join(cmd),
        "wall_s": round(wall, 1),
        "peak_rss_mb": round(peaks.get("all", 0) / MB),
    }


def run_dask(cmd: list[str], workers: int, memory_limit: str, env: dict) -> dict:
    cluster = Cluster(workers, memory_limit, env)
    try:
        cmd = [*cmd, "--runner", "DaskRunner", "--dask_client_address", cluster.address]
        pids = cluster.worker_pids()

        def sample(launcher: int) -> dict[str, int]:
            now = {
                "launcher": tree_rss_bytes(launcher),
                "scheduler": _rss_bytes(cluster.scheduler.pid),
            }
            for i, pid in enumerate(pids):
                now[f"worker{i}"] = _rss_bytes(pid)
            cluster_total = tree_rss_bytes(cluster.worker.pid)  # nannies + workers
            now["all"] = now["launcher"] + now["scheduler"] + cluster_total
            return now

        since = cluster.start_task_stream()
        wall, peaks = run_sampled(cmd, env, sample, "dask")
        restarted = sorted(set(pids) - set(cluster.worker_pids()))
        task_time = cluster.task_time(since, wall, workers)
    finally:
        cluster.close()
    return {
        "command": " ".join(cmd),
        "wall_s": round(wall, 1),
        "peak_rss_mb": {k: round(v / MB) for k, v in peaks.items()},
        "memory_limit": memory_limit,
        "workers_restarted": len(restarted),
        "task_time": task_time,
    }


def stages(out: Path) -> dict[str, float]:
    summary = json.loads((out / "run_summary.json").read_text())
    return {s["name"]: round(s["seconds"], 1) for s in summary["stages"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=float, nargs="+", default=[25, 100])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="4GiB", help="per Dask worker (default: 4GiB)")
    parser.add_argument("--keep", action="store_true", help="keep both outputs")
    args = parser.parse_args()
    env = environment()
    date = datetime.date.today().isoformat()
    rows, results = [], []
    for mb in args.megabytes:
        corpus = build_corpus(mb, progress=lambda m: print(m, file=sys.stderr))
        result: dict = {"corpus_mb": round(corpus["bytes"] / 1e6, 1), "date": date}
        outs = {}
        for name in ("direct", "dask"):
            out = WORK / f"dask-bench-{mb:g}mb-{name}"
            shutil.rmtree(out, ignore_errors=True)
            config = WORK / f"dask-bench-{mb:g}mb-{name}.yaml"
            write_config(corpus, out, config)
            cmd = [*bertprep_command(), "run", "--config", str(config)]
            print(f"[{mb:g} MB] {name} ...", file=sys.stderr, flush=True)
            if name == "direct":
                result[name] = run_direct(cmd, args.workers, env)
            else:
                result[name] = run_dask(cmd, args.workers, args.memory_limit, env)
            result[name]["stages"] = stages(out)
            outs[name] = out
        result["same_shards"] = shard_hashes(outs["dask"]) == shard_hashes(outs["direct"])
        result["shards"] = sum(len(v) for v in shard_hashes(outs["dask"]).values())
        if not args.keep:
            for out in outs.values():
                shutil.rmtree(out, ignore_errors=True)
        results.append(result)
        d, k = result["direct"], result["dask"]
        workers = max(v for n, v in k["peak_rss_mb"].items() if n.startswith("worker"))
        rows.append(
            f"| {date} | {result['corpus_mb']} MB | {d['wall_s']} s | {k['wall_s']} s | "
            f"{k['wall_s'] / d['wall_s']:.2f}× | {d['peak_rss_mb']:,} MB | "
            f"{k['peak_rss_mb']['all']:,} MB | {k['peak_rss_mb']['launcher']:,} / "
            f"{k['peak_rss_mb']['scheduler']:,} / {workers:,} MB | {result['same_shards']} |"
        )
        print(json.dumps(result, indent=1), file=sys.stderr)
    print(
        "| date | corpus | direct wall | dask wall | dask/direct | direct peak RSS | "
        "dask peak RSS (all) | launcher / scheduler / largest worker | same shards |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    log = WORK / f"dask_benchmark-{date}.json"
    previous = json.loads(log.read_text()) if log.exists() else []
    log.write_text(json.dumps(previous + results, indent=1))
    return 0 if all(r["same_shards"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
