"""``store merge``: combine response stores recorded apart (shards, machines) into one.

:func:`merge_stores` copies every row of the sources into the target, in one
transaction (all or nothing), source by source:

- a key the target lacks is added;
- a key it holds with the *same response* is a duplicate, kept once. The same
  response: equal request fields, text, parsed answer, letter probabilities,
  status, error, token counts and extra fields; latency, cost, ``created_at`` and
  ``meta`` are provenance and do not count. An unknown fingerprint (a row migrated
  from schema 1) matches any, and a known one fills it in; one recorded before an
  entry was added to its backend's fingerprint matches on the entries it has
  (:func:`~.fingerprint.same_answerer`);
- an error row in the target is replaced by a non-error row; an error row in a
  source never replaces anything;
- the same key with different (non-error) responses is a conflict: nothing is
  written and a :class:`DataError` names the conflicting keys (all of them
  counted, the first few shown with the two stores and what differs).

Secrets are still scrubbed: every copied request, meta, error, extra and
fingerprint text passes through the store's scrubber (the values of secret-looking
environment variables of *this* machine included). Each source is opened as a
store first, so its schema is checked (an older one migrated, a newer one
refused). Sources are attached to the target's SQLite connection, so the copy
runs inside SQLite; at most :data:`MAX_SOURCES` at once.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

from fairness_tests.core.errors import DataError
from fairness_tests.models.store.fingerprint import same_answerer
from fairness_tests.models.store.scrub import StoredTextScrubber
from fairness_tests.models.store.store import ResponseStore
from fairness_tests.models.store.store_schema import RESPONSE_COLUMNS

MAX_SOURCES = 9     # SQLite attaches at most 10 databases by default; one is spare

# the columns whose equality makes two rows the same response
_SAME = ("request_json", "text", "answer", "letter_probs", "status", "error", "extra_json",
         "prompt_tokens", "completion_tokens")
_CLEAN = {"request_json": "json", "meta_json": "json", "error": "text", "extra_json": "json"}


def _cleaned(alias: str, col: str) -> str:
    kind = _CLEAN.get(col)
    return f"scrub_{kind}({alias}.{col})" if kind else f"{alias}.{col}"


def merge_stores(sources: Iterable[str | os.PathLike], into: str | os.PathLike,
                 show: int = 5) -> dict[str, int]:
    """Merge ``sources`` into the store at ``into`` (created if absent); returns counts
    ``added``, ``duplicates``, ``replaced_errors``, ``kept_errors`` and ``sources``."""
    target_path = Path(into)
    paths: list[Path] = []
    for src in sources:
        p = Path(src)
        if not p.is_file():
            raise DataError("no such store", path=p)
        if target_path.exists() and p.resolve() == target_path.resolve():
            raise DataError("a store cannot be merged into itself", path=p)
        if p.resolve() not in [q.resolve() for q in paths]:
            paths.append(p)
    if not paths:
        raise DataError("nothing to merge: name at least one source store")
    if len(paths) > MAX_SOURCES:
        raise DataError(f"merge at most {MAX_SOURCES} stores at once ({len(paths)} given): "
                        f"merge them in rounds into the same --into store")
    for p in paths:                      # schema checked (and migrated) by opening
        ResponseStore(p).close()

    counts = {"sources": len(paths), "added": 0, "duplicates": 0, "replaced_errors": 0,
              "kept_errors": 0}
    scrubber = StoredTextScrubber()
    with ResponseStore(target_path) as target, target._lock:
        conn = target._connect()
        conn.create_function("scrub_text", 1, scrubber.text, deterministic=True)
        conn.create_function("scrub_json", 1, scrubber.json_text, deterministic=True)
        conn.create_function("same_answerer", 2, _same_answerer_json, deterministic=True)
        aliases = [f"src{i}" for i in range(len(paths))]
        for alias, p in zip(aliases, paths, strict=True):
            conn.execute(f"ATTACH DATABASE ? AS {alias}", (str(p),))
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conflicts: list[tuple[str, Path]] = []
                provenance = []
                for alias, p in zip(aliases, paths, strict=True):
                    before = counts["added"]
                    found = _merge_one(conn, alias, counts)
                    conflicts += [(k, p) for k in found]
                    rows = conn.execute(f"SELECT COUNT(*) FROM {alias}.responses").fetchone()[0]
                    provenance.append({"source": scrubber.text(str(p)), "rows": int(rows),
                                       "added": counts["added"] - before})
                if conflicts:
                    raise _conflict_error(conn, conflicts, aliases, paths, target_path, show)
                _record_provenance(conn, provenance)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            for alias in aliases:
                conn.execute(f"DETACH DATABASE {alias}")
    return counts


def _record_provenance(conn, provenance: list[dict]) -> None:
    """Append this merge's sources to ``store_info('merged_from')`` (what a run made
    from this store reports on its card)."""
    row = conn.execute("SELECT value FROM main.store_info WHERE name = 'merged_from'").fetchone()
    merged = (json.loads(row[0]) if row else []) + provenance
    conn.execute("INSERT OR REPLACE INTO main.store_info(name, value) VALUES ('merged_from', ?)",
                 (json.dumps(merged, sort_keys=True),))


def _merge_one(conn, alias: str, counts: dict[str, int]) -> list[str]:
    """Copy one attached source into ``main``; returns the conflicting keys (not copied)."""
    same = " AND ".join(f"{_cleaned('s', c)} IS m.{c}" for c in _SAME)
    fp_ok = (f"(s.fingerprint IS m.fingerprint OR s.fingerprint IS NULL OR m.fingerprint IS NULL "
             f"OR same_answerer((SELECT fingerprint_json FROM {alias}.fingerprints WHERE id = "
             f"s.fingerprint), (SELECT fingerprint_json FROM main.fingerprints WHERE id = "
             f"m.fingerprint)))")
    conflicts = [k for (k,) in conn.execute(
        f"SELECT s.key FROM {alias}.responses s JOIN main.responses m ON m.key = s.key "
        f"WHERE s.status != 'error' AND m.status != 'error' AND NOT ({same} AND {fp_ok}) "
        f"ORDER BY s.key")]
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS merge_conflicts (key TEXT PRIMARY KEY)")
    conn.execute("DELETE FROM temp.merge_conflicts")
    conn.executemany("INSERT INTO temp.merge_conflicts(key) VALUES (?)", [(k,) for k in conflicts])

    conn.execute(f"INSERT OR IGNORE INTO main.fingerprints(id, fingerprint_json) "
                 f"SELECT id, scrub_json(fingerprint_json) FROM {alias}.fingerprints")
    cols = ", ".join(RESPONSE_COLUMNS)
    values = ", ".join(_cleaned("s", c) for c in RESPONSE_COLUMNS)
    not_conflict = "s.key NOT IN (SELECT key FROM temp.merge_conflicts)"
    counts["duplicates"] += conn.execute(
        f"SELECT COUNT(*) FROM {alias}.responses s JOIN main.responses m ON m.key = s.key "
        f"WHERE s.status != 'error' AND m.status != 'error' AND {not_conflict}").fetchone()[0]
    counts["kept_errors"] += conn.execute(
        f"SELECT COUNT(*) FROM {alias}.responses s JOIN main.responses m ON m.key = s.key "
        f"WHERE s.status = 'error'").fetchone()[0]
    # an unknown fingerprint on a duplicate is filled in from the source
    conn.execute(
        f"UPDATE main.responses SET fingerprint = (SELECT s.fingerprint FROM "
        f"{alias}.responses s WHERE s.key = main.responses.key) "
        f"WHERE fingerprint IS NULL AND status != 'error' AND key IN (SELECT s.key FROM "
        f"{alias}.responses s WHERE s.fingerprint IS NOT NULL AND s.status != 'error' "
        f"AND {not_conflict})")
    counts["replaced_errors"] += conn.execute(
        f"INSERT OR REPLACE INTO main.responses ({cols}) SELECT {values} FROM "
        f"{alias}.responses s JOIN main.responses m ON m.key = s.key "
        f"WHERE m.status = 'error' AND s.status != 'error'").rowcount
    counts["added"] += conn.execute(
        f"INSERT INTO main.responses ({cols}) SELECT {values} FROM {alias}.responses s "
        f"WHERE NOT EXISTS (SELECT 1 FROM main.responses m WHERE m.key = s.key)").rowcount
    return conflicts


def _same_answerer_json(a: str | None, b: str | None) -> bool:
    """Two stored fingerprints (JSON) of one answerer: equal up to the entries one of
    them predates (:func:`~.fingerprint.same_answerer`, either way round)."""
    if a is None or b is None:
        return False
    fa, fb = json.loads(a), json.loads(b)
    return same_answerer(fa, fb) or same_answerer(fb, fa)


def _conflict_error(conn, conflicts: list[tuple[str, Path]], aliases: list[str],
                    paths: list[Path], target: Path, show: int) -> DataError:
    lines = [f"{len(conflicts)} key(s) hold different responses in the stores merged into "
             f"{target}; nothing was written. First {min(show, len(conflicts))}:"]
    for key, src in conflicts[:show]:
        alias = aliases[paths.index(src)]
        a = conn.execute(f"SELECT text, status, answer FROM {alias}.responses WHERE key = ?",
                         (key,)).fetchone()
        b = conn.execute("SELECT text, status, answer FROM main.responses WHERE key = ?",
                         (key,)).fetchone()
        other = [str(p) for al, p in zip(aliases, paths, strict=True) if p != src and conn.execute(
            f"SELECT 1 FROM {al}.responses WHERE key = ?", (key,)).fetchone()]
        where = ", ".join(other) if other else str(target)
        lines.append(f"  key {key}: {src} has {a[1]} {a[0][:60]!r} (answer {a[2]}), "
                     f"{where} has {b[1]} {b[0][:60]!r} (answer {b[2]})")
    lines.append("Keep one recording of each key: prune one side (`fairness-tests store prune "
                 "--store ...`) or merge the stores separately.")
    exc = DataError("\n".join(lines), key=conflicts[0][0])
    # the conflicting keys, for the caller: an extra attribute of this one DataError
    exc.conflicts = [k for k, _ in conflicts]            # type: ignore[attr-defined]
    return exc
