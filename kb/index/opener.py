"""Keep the index true to the case files and the model, by itself.

`open_index()` is what every search calls. Fast path: stat the case files and
the model weights and compare them with the live generation's manifest; if
nothing changed, the index is used as it is (no YAML parsing, no hashing).
Otherwise, under the lock: parse the cases, re-embed only the cases whose
content hash changed (or all, if the model changed), write a new generation
atomically, and switch to it. A missing or broken model turns dense search
off with a reason; lexical and signature search keep working.

The work is done by the index_* modules (docs/architecture.md): this one
decides which generation a search gets.
"""

from __future__ import annotations

from pathlib import Path

from kb.cases.caseset import case_folders
from kb.core.paths import default_index_dir, is_writable_dir
from kb.index import store
from kb.index.fingerprint import file_stats, model_identity, walk_folders
from kb.index.folder import choose_root
from kb.index.load import IndexStatus, LoadedIndex, load_if_current, load_previous
from kb.index.model import ModelError, ModelSpec, resolve_model

__all__ = ["IndexStatus", "LoadedIndex", "open_index"]


def open_index(
    extra_dirs: list[Path] | None = None,
    index_dir: Path | None = None,
    model_dir: Path | None = None,
    include_builtin: bool = True,
    rebuild: bool = False,
    progress: bool | None = None,
    dense: bool = True,
    dense_texts: int | None = None,
) -> LoadedIndex:
    """Return an up-to-date index, updating it first if the cases or model changed.

    `dense_texts` keeps only the first N dense texts of each case (title,
    summary, ...) when embedding: for very large synthetic sets (see
    benchmarks/scale.py), where embedding ~10 texts per case would take hours.
    """
    folders = case_folders(extra_dirs, include_builtin)
    try:
        spec: ModelSpec | None = resolve_model(model_dir) if dense else None
        spec_error = ""
    except ModelError as exc:
        spec, spec_error = None, str(exc)
    walked = walk_folders(folders)
    stats = file_stats(folders, walked)
    identity = model_identity(spec)
    requested = Path(index_dir) if index_dir else default_index_dir()
    if not rebuild and not is_writable_dir(requested):
        # a shared, read-only index (an admin's, on a read-only mount) is used as it is while it is current
        loaded = load_if_current(requested, folders, stats, identity, [f"index folder {requested} is read-only; using its index as it is"], any_model=not dense)
        if loaded is not None:
            loaded.case_files = walked  # current: made from exactly these files
            return loaded
    root, notes = choose_root(index_dir)
    if not rebuild:
        loaded = load_if_current(root, folders, stats, identity, notes, any_model=not dense)
        if loaded is not None:
            loaded.case_files = walked  # current: made from exactly these files
            return loaded
    try:
        with store.locked(root):
            if not rebuild:  # another process may have finished the update while we waited
                loaded = load_if_current(root, folders, stats, identity, notes, any_model=not dense)
                if loaded is not None:
                    loaded.case_files = walked
                    return loaded
            moved = store.set_aside_bad_current(root)
            if moved:
                notes.append(moved)
            from kb.index.build import update  # parsing and embedding: not on the path of a current index

            return update(root, folders, extra_dirs, include_builtin, spec, spec_error, identity, rebuild, progress, notes, dense_texts)
    except store.IndexBusy as busy:
        previous = load_previous(root, notes)
        if previous is None:
            raise
        previous.status.notes.append(
            f"{busy}; this answer uses the previous index {previous.generation.name}, which may miss recent case changes"
        )
        return previous
