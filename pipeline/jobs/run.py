"""``bertprep run``: every stage in order, each skipped when its artifact is current.

Stages and their artifact directories under ``output``:
``clean`` → ``clean/``; ``split`` (held-out documents) → ``split/{train,eval}/``; ``vocab`` →
``vocab/`` (or a given vocab.txt); ``tokenize`` → ``tokens/{train,eval}/`` (token ids computed
once, read by every phase and every dupe pass); one ``phase:<name>`` per instance phase →
``<name>/train/`` and ``<name>/eval/``. A stage's fingerprint hashes its whole job config, the
package version and the fingerprints of what it reads (``pipeline.jobs.config.stage_fingerprint``); when its directory holds ``stage.json`` with that fingerprint (written only after the stage
finished), the stage is skipped. So an interrupted run resumes where it stopped, and a config
change reruns exactly the stages it affects and those downstream of them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from pipeline.files.artifacts import write_json_atomically
from pipeline.jobs.clean import CleanJobConfig
from pipeline.jobs.config import job_settings, stage_fingerprint
from pipeline.jobs.instances import InstancesJobConfig
from pipeline.jobs.run_config import SOURCES, PhaseConfig, RunConfig
from pipeline.jobs.vocab import VocabJobConfig
from pipeline.runtime.failures import running_stage
from pipeline.runtime.interrupts import raise_if_interrupted
from transforms.errors import UserError

STAGE_FILE = "stage.json"
SUMMARY = "run_summary.json"


class EmptyTokensError(UserError, RuntimeError):
    """The tokenize stage kept no training document; the message says where the rejects are."""


@dataclass
class StageResult:
    name: str
    status: str  # "ran" or "skipped"
    seconds: float
    fingerprint: str
    details: dict
    shared_with: list[str] = field(default_factory=list)  # stages run in the same pipeline


def _read_stage(directory: str) -> dict | None:
    path = FileSystems.join(directory, STAGE_FILE)
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as f:
        return json.loads(f.read().decode("utf-8"))


def _write_stage(directory: str, payload: dict) -> None:
    raise_if_interrupted()
    write_json_atomically(FileSystems.join(directory, STAGE_FILE), payload)


class Runner:
    """Runs stages in order, skipping current ones; records what happened."""

    def __init__(self, force: set[str], progress: Callable[[str], None]) -> None:
        self.force = force
        self.progress = progress
        self.results: list[StageResult] = []

    def stage(self, name: str, directory: str, fp: str, work: Callable[[], dict]) -> dict:
        """Runs ``work`` unless ``directory``'s marker has ``fp``; returns the stage's details."""
        return self.stages([(name, directory, fp)], lambda names: {name: work()})[name]

    def stages(
        self,
        specs: list[tuple[str, str, str]],
        work: Callable[[list[str]], dict[str, dict]],
    ) -> dict[str, dict]:
        """Several stages ``(name, directory, fingerprint)`` done by one piece of work (e.g. all
        phases in one pipeline): ``work(names)`` runs only the stale ones, in ``specs`` order,
        and returns their details by name. Each stage keeps its own marker, so one that is
        current is skipped; the ones run together share their wall seconds. Returns the details
        of every stage by name."""
        details: dict[str, dict] = {}
        stale: list[tuple[str, str, str]] = []
        for name, directory, fp in specs:
            previous = _read_stage(directory)
            forced = name in self.force or name.split(":")[0] in self.force or "all" in self.force
            if previous and previous.get("fingerprint") == fp and not forced:
                self.progress(f"{name}: up to date (fingerprint {fp}), skipped")
                self.results.append(StageResult(name, "skipped", 0.0, fp, previous["details"]))
                details[name] = previous["details"]
                continue
            marker = FileSystems.join(directory, STAGE_FILE)
            if FileSystems.exists(marker):  # stale: remove before work so a crash cannot keep it
                FileSystems.delete([marker])
            stale.append((name, directory, fp))
        if not stale:
            return details
        names = [name for name, _, _ in stale]
        together = f" (together: {', '.join(names)})" if len(names) > 1 else ""
        for name in names:
            self.progress(f"{name}: running...{together if name == names[0] else ''}")
        started = time.monotonic()
        with running_stage(names, [directory for _, directory, _ in stale]):
            done = work(names)
        seconds = time.monotonic() - started
        for name, directory, fp in stale:
            _write_stage(directory, {"stage": name, "fingerprint": fp, "details": done[name]})
            self.progress(f"{name}: done in {seconds:.1f} s")
            self.results.append(
                StageResult(name, "ran", seconds, fp, done[name], [n for n in names if n != name])
            )
            details[name] = done[name]
        return {name: details[name] for name, _, _ in specs}


def stage_names(config: RunConfig) -> list[str]:
    """What ``--force`` accepts: every stage, ``phase`` (all phases) and ``all``."""
    return [
        "clean",
        "split",
        "vocab",
        "tokenize",
        *(f"phase:{p.name}" for p in config.phases),
        "phase",
        "all",
    ]


def preflight(config: RunConfig, force: set[str]) -> None:
    """Every check that needs no stage's output, before any stage (and so before any
    ``stage.json`` is touched): ``--force`` names, each phase's instance settings, a given vocab.
    Raises ConfigError naming the config key (or the flag) at fault."""
    import difflib

    from pipeline.jobs.instances import JobConfigError, Naming, check_settings
    from pipeline.jobs.run_config import ConfigError
    from tokenizer.vocab import Vocab, VocabError

    known = stage_names(config)
    for name in sorted(force):
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"--force {name}: no such stage{hint}; known: {', '.join(known)}")
    from pipeline.jobs.reference_compat import ONE, REFERENCE, check_reference_config

    for i, phase in enumerate(config.phases):
        naming = Naming(f"phases[{i}].")
        try:
            job = phase_job_configs(config, phase, "(vocab)")["train"]
            if phase.compat == REFERENCE:
                check_reference_config(job, naming)
                if phase.invocations != ONE:
                    raise JobConfigError(
                        f"{naming('invocations')} {phase.invocations}: in bertprep run a "
                        "compat phase is one invocation of the reference per side, over the "
                        "side's documents in key order; for one invocation per part file run "
                        "bertprep instances --compat reference --invocations per-file"
                    )
            else:
                check_settings(job, naming)
        except JobConfigError as e:
            raise ConfigError(str(e)) from e
    if config.vocab.path:
        try:
            Vocab.from_file(config.vocab.path)
        except (OSError, VocabError) as e:
            raise ConfigError(f"vocab.path {config.vocab.path}: {e}") from e


def clean_job_config(config: RunConfig) -> CleanJobConfig:
    """The clean stage's job: ``inputs`` and ``clean`` keys as they are, the run's seed."""
    return CleanJobConfig(
        output=FileSystems.join(config.output, "clean"),
        **job_settings(config.inputs, CleanJobConfig),
        **job_settings(config.clean, CleanJobConfig),
        export_text=False,
        seed=config.seed,
    )


def vocab_job_config(config: RunConfig) -> VocabJobConfig:
    """The vocab stage's job: ``vocab`` keys, trained on the clean documents less the split's
    held-out ones (same seed and fraction)."""
    return VocabJobConfig(
        input=FileSystems.join(config.output, "clean", "documents-*.parquet"),
        output=FileSystems.join(config.output, "vocab"),
        **job_settings(config.vocab, VocabJobConfig),
        seed=config.seed,
        exclude_eval_fraction=config.eval.fraction,
    )


def phase_job_configs(
    config: RunConfig, phase: PhaseConfig, vocab_path: str
) -> dict[str, InstancesJobConfig]:
    """A phase's two instance jobs by side: every ``phases[i]`` key as it is, on the tokenize
    stage's files; the eval side makes one pass into ``eval_num_shards`` shards."""
    from pipeline.jobs.tokenize import INDEX_PATTERN

    tokens_dir = FileSystems.join(config.output, "tokens")
    phase_dir = FileSystems.join(config.output, phase.name)
    train = InstancesJobConfig(
        **job_settings(phase, InstancesJobConfig),
        inputs=[FileSystems.join(tokens_dir, "train", INDEX_PATTERN)],
        pretokenized=True,
        vocab=vocab_path,
        output=FileSystems.join(phase_dir, "train"),
        seed=config.seed,
        do_lower_case=config.vocab.do_lower_case,
    )
    return {
        "train": train,
        "eval": replace(
            train,
            inputs=[FileSystems.join(tokens_dir, "eval", INDEX_PATTERN)],
            output=FileSystems.join(phase_dir, "eval"),
            dupe_factor=1,
            num_shards=phase.eval_num_shards,
        ),
    }


def run_all(
    config: RunConfig,
    options_for: Callable[[], PipelineOptions],
    force: set[str] = frozenset(),
    progress: Callable[[str], None] = print,
) -> dict:
    """Runs (or skips) every stage and writes ``run_summary.json``; returns the summary.

    Raises ConfigError (``preflight``) before any work for settings no stage could run with.
    """
    from pipeline.files.input_files import expand_inputs
    from pipeline.jobs.clean import run_clean_job
    from pipeline.jobs.instances import Naming, run_instances_jobs
    from pipeline.jobs.reference_compat import REFERENCE, run_reference_job
    from pipeline.jobs.split import run_split_job
    from pipeline.jobs.tokenize import run_split_and_tokenize_jobs, run_tokenize_job
    from pipeline.jobs.vocab import run_vocab_job
    from tokenizer.vocab import Vocab

    preflight(config, set(force))
    out = config.output
    runner = Runner(set(force), progress)
    started = time.monotonic()

    inputs = {
        kind: [f.fingerprint() for f in expand_inputs(patterns)]
        for kind in SOURCES
        if (patterns := getattr(config.inputs, kind))
    }
    clean_dir = FileSystems.join(out, "clean")
    clean_job = clean_job_config(config)
    clean_fp = stage_fingerprint("clean", clean_job, inputs)

    def clean() -> dict:
        manifest = run_clean_job(clean_job, options_for(), progress)
        return {k: manifest[k] for k in ("totals", "counts", "sentence_splitter")}

    clean_details = runner.stage("clean", clean_dir, clean_fp, clean)

    split_dir = FileSystems.join(out, "split")
    split_fp = stage_fingerprint(
        "split", clean_fp, {"fraction": config.eval.fraction, "seed": config.seed}
    )

    def split_details_of(documents: dict[str, int]) -> dict:
        return {
            "documents": documents,
            "eval_fraction": config.eval.fraction,
            "rule": "stable_hash64(seed, 'eval', doc_id) < fraction * 2**64",
        }

    def split() -> dict:
        return split_details_of(
            run_split_job(
                clean_dir, split_dir, config.seed, config.eval.fraction, options_for(), progress
            )
        )

    vocab_dir = FileSystems.join(out, "vocab")
    tokens_dir = FileSystems.join(out, "tokens")
    lowercase = config.vocab.do_lower_case

    def tokens_details_of(manifests: dict[str, dict]) -> dict:
        return {
            side: {
                "files": len(m["files"]),
                "documents": sum(m["files"].values()),
                "vocab_sha256": m["vocab_sha256"],
                "counts": m["counts"],
            }
            for side, m in manifests.items()
        }

    def tokenize(split_details: dict) -> dict:
        sides = {
            side: (
                FileSystems.join(split_dir, side, "documents-*.parquet"),
                FileSystems.join(tokens_dir, side),
            )
            for side in ("train", "eval")
            if split_details["documents"].get(side, 0)
        }
        manifests = run_tokenize_job(sides, vocab_path, lowercase, options_for(), progress)
        return tokens_details_of(manifests)

    if config.vocab.path:
        vocab_path = config.vocab.path
        given = Vocab.from_file(vocab_path)
        vocab_fp = stage_fingerprint("vocab-given", given.sha256)
        vocab_details = {"path": vocab_path, "sha256": given.sha256, "size": len(given)}
        tokens_fp = stage_fingerprint("tokens", split_fp, vocab_fp, {"do_lower_case": lowercase})

        def split_and_tokenize(names: list[str]) -> dict[str, dict]:
            """With a given vocabulary nothing runs between the two: one pipeline for both."""
            if names == ["split"]:
                return {"split": split()}
            if names == ["tokenize"]:
                return {"tokenize": tokenize(_read_stage(split_dir)["details"])}
            documents, manifests = run_split_and_tokenize_jobs(
                clean_dir,
                split_dir,
                config.seed,
                config.eval.fraction,
                tokens_dir,
                vocab_path,
                lowercase,
                options_for(),
                clean_details["totals"]["documents"],
                progress,
            )
            return {"split": split_details_of(documents), "tokenize": tokens_details_of(manifests)}

        done = runner.stages(
            [("split", split_dir, split_fp), ("tokenize", tokens_dir, tokens_fp)],
            split_and_tokenize,
        )
        split_details, tokens_details = done["split"], done["tokenize"]
    else:
        split_details = runner.stage("split", split_dir, split_fp, split)
        vocab_path = FileSystems.join(vocab_dir, "vocab.txt")
        vocab_job = vocab_job_config(config)
        vocab_fp = stage_fingerprint("vocab", split_fp, vocab_job)

        def vocab() -> dict:
            manifest = run_vocab_job(vocab_job, options_for(), progress)
            return {
                "path": vocab_path,
                "sha256": manifest["vocab"]["sha256"],
                "size": manifest["vocab"]["size"],
                "report": manifest["report"]["heldout"],
            }

        vocab_details = runner.stage("vocab", vocab_dir, vocab_fp, vocab)
        tokens_fp = stage_fingerprint("tokens", split_fp, vocab_fp, {"do_lower_case": lowercase})
        tokens_details = runner.stage(
            "tokenize", tokens_dir, tokens_fp, lambda: tokenize(split_details)
        )
    if split_details["documents"].get("train", 0) and not tokens_details.get("train", {}).get(
        "documents"
    ):
        raise EmptyTokensError(
            f"none of the {split_details['documents']['train']:,} training documents has a "
            "sentence that tokenizes to at least one token (see "
            f"{FileSystems.join(tokens_dir, 'train', 'rejects.jsonl')})"
        )

    phase_specs = []
    phases_by_name = {}
    for phase in config.phases:
        phase_dir = FileSystems.join(out, phase.name)
        sides = phase_job_configs(config, phase, vocab_path)
        phase_fp = stage_fingerprint("phase", tokens_fp, sides["train"], sides["eval"])
        phase_specs.append((f"phase:{phase.name}", phase_dir, phase_fp))
        phases_by_name[f"phase:{phase.name}"] = (phase, phase_dir, sides)

    def make_phases(names: list[str]) -> dict[str, dict]:
        """Every stale phase, train and eval sides, in one pipeline: one runner start-up."""
        jobs: dict[tuple[str, str], InstancesJobConfig] = {}
        for name in names:
            phase, _, sides = phases_by_name[name]
            for side, job in sides.items():
                if not tokens_details.get(side, {}).get("documents"):
                    progress(f"phase:{phase.name}: no {side} documents, no {side} shards")
                    continue
                jobs[name, side] = job
        native = {k: job for k, job in jobs.items() if job.compat != REFERENCE}
        manifests = dict(
            zip(
                native,
                run_instances_jobs(list(native.values()), options_for(), progress)
                if native
                else [],
                strict=True,
            )
        )
        for (name, side), job in jobs.items():
            if job.compat == REFERENCE:  # the reference's own draws: a pipeline of its own
                index = [p.name for p in config.phases].index(name.split(":", 1)[1])
                manifests[name, side] = run_reference_job(
                    job, options_for(), progress, Naming(f"phases[{index}].")
                )
        results: dict[str, dict] = {name: {} for name in names}
        for name, side in jobs:
            manifest = manifests[name, side]
            phase_dir = phases_by_name[name][1]
            t = manifest["totals"]
            results[name][side] = {
                "instances": t["instances"],
                "rows": t.get("rows", t["instances"]),
                "packed": bool(manifest.get("packing")),
                "shards": len(manifest["shards"]),
                "is_next_ratio": t["is_next_ratio"],
                "pairs": manifest["counts"].get("pairs", 0),
                "single_sentence_chunks": manifest["counts"].get("single_sentence_chunks", 0),
                "bytes": _bytes_of(FileSystems.join(phase_dir, side)),
            }
        return results

    phase_details = runner.stages(phase_specs, make_phases)
    phase_rows = [{"phase": name.split(":", 1)[1], **d} for name, d in phase_details.items()]

    summary = {
        "output": out,
        "stages": [asdict(r) for r in runner.results],
        "documents": clean_details["totals"]["documents"],
        "sentences": clean_details["totals"]["sentences"],
        "counts": clean_details["counts"],
        "split": split_details["documents"],
        "vocab": {k: v for k, v in vocab_details.items() if k != "report"},
        "phases": phase_rows,
        "seconds": round(time.monotonic() - started, 1),
    }
    write_json_atomically(FileSystems.join(out, SUMMARY), summary)
    return summary


def _bytes_of(directory: str) -> int:
    matched = FileSystems.match([FileSystems.join(directory, "*.tfrecord*")])[0].metadata_list
    return sum(m.size_in_bytes for m in matched)


def _size(n: int) -> str:
    """Bytes for a person: ``850 B``, ``14 kB``, ``1.5 MB``, ``2.30 GB``."""
    if n >= 1e9:
        return f"{n / 1e9:.2f} GB"
    if n >= 1e6:
        return f"{n / 1e6:.1f} MB"
    if n >= 1e3:
        return f"{n / 1e3:.0f} kB"
    return f"{n} B"


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _listing(counts: dict[str, int], prefix: str) -> str:
    """``too short 8, redirect 1``: counts named ``prefix<reason>``, largest first."""
    items = sorted(
        ((k.removeprefix(prefix).replace("_", " "), v) for k, v in counts.items()),
        key=lambda kv: (-kv[1], kv[0]),
    )
    return ", ".join(f"{name} {n:,}" for name, n in items)


def describe_drops(counts: dict[str, int]) -> str:
    """A source's drop counts in words: whole documents (``dropped_<reason>``), non-prose
    paragraphs cut from books (``dropped_nonprose_*``), truncations and empty inputs."""
    documents = {
        k: v
        for k, v in counts.items()
        if k.startswith("dropped_") and not k.startswith("dropped_nonprose_")
    }
    parts = []
    if documents:
        parts.append(
            f"{_plural(sum(documents.values()), 'document')} dropped "
            f"({_listing(documents, 'dropped_')})"
        )
    paragraphs = counts.get("dropped_nonprose_paragraphs", 0)
    if paragraphs:
        rules = {
            k: v
            for k, v in counts.items()
            if k.startswith("dropped_nonprose_") and k != "dropped_nonprose_paragraphs"
        }
        parts.append(
            f"{_plural(paragraphs, 'non-prose paragraph')} cut"
            + (f" ({_listing(rules, 'dropped_nonprose_')})" if rules else "")
        )
    other = {k: v for k, v in counts.items() if k.startswith(("truncated", "empty"))}
    if other:
        parts.append(_listing(other, ""))
    return "; ".join(parts) or "nothing dropped"


IS_NEXT_NOTE = (
    "  IsNext < 50%: a chunk of one sentence has no B of its own, so it always takes a random\n"
    "  next (as in google-research/bert); chunks of 2+ sentences are IsNext half the time."
)


def _is_next(r: dict) -> tuple[str, bool]:
    """``IsNext 43.9% (48.4% of 1,645 chunks of 2+ sentences)`` and whether the note applies."""
    ratio = r.get("is_next_ratio")
    if ratio is None:
        return "IsNext n/a", False
    text = f"IsNext {100 * ratio:.1f}%"
    pairs, single = r.get("pairs", 0), r.get("single_sentence_chunks", 0)
    free = pairs - single
    if single and free > 0:
        is_next = round(ratio * pairs)
        text += f" ({100 * is_next / free:.1f}% of {free:,} chunks of 2+ sentences)"
        return text, True
    return text, False


def format_summary(summary: dict) -> str:
    """The end-of-run table a person reads."""
    lines = ["stage                 status    seconds"]
    for s in summary["stages"]:
        shared = s.get("shared_with") or []
        together = f"  (one pipeline with {', '.join(shared)})" if shared else ""
        lines.append(f"  {s['name']:<20}{s['status']:<10}{s['seconds']:>7.1f}{together}")
    lines.append(
        f"documents {summary['documents']:,}, sentences {summary['sentences']:,}; "
        f"split train/eval {summary['split'].get('train', 0):,}/"
        f"{summary['split'].get('eval', 0):,} documents; vocab {summary['vocab']['size']:,} "
        "tokens"
    )
    for source, counts in sorted(summary["counts"].items()):
        lines.append(
            f"  {source}: {_plural(counts.get('documents_out', 0), 'document')} out; "
            f"{describe_drops(counts)}"
        )
    noted = False
    for row in summary["phases"]:
        for side in ("train", "eval"):
            if side in row:
                r = row[side]
                is_next, note = _is_next(r)
                noted = noted or note
                rows = f" ({r['rows']:,} packed rows)" if r.get("packed") else ""
                lines.append(
                    f"  {row['phase']}/{side}: {_plural(r['instances'], 'instance')}{rows} in "
                    f"{_plural(r['shards'], 'shard')}, {_size(r['bytes'])}, {is_next}"
                )
    if noted:
        lines.append(IS_NEXT_NOTE)
    lines.append(f"total {summary['seconds']} s; summary in {summary['output']}/{SUMMARY}")
    return "\n".join(lines)
