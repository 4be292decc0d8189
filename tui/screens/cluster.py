"""Cluster report: a saved `kb doctor --ray ADDRESS --json` file, shown as `kb doctor --ray` prints it.

Opened from the command palette ("Cluster report"). Type the file's path,
Enter loads it; the text is kb.cluster.report's, so the app and the terminal
say the same thing (per-node tables, the differences with the cases they
point to, the unreachable nodes). A file that is not such a report is named
with what is wrong, and nothing else changes.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Label, Static

from kb.cluster.report import BadClusterReport, format_cluster_report, load_cluster_report
from kb.core.safe_text import visible


class ClusterScreen(Screen[None]):
    BINDINGS = [Binding("escape", "close", "Back")]
    DEFAULT_CSS = """
    ClusterScreen #cluster-path { margin: 0 1; }
    ClusterScreen #cluster-status { margin: 0 1; color: $text-muted; }
    ClusterScreen #cluster-body { padding: 0 1; }
    """

    def __init__(self, path: Path | None = None) -> None:
        super().__init__()
        self.start_path = path

    def compose(self) -> ComposeResult:
        yield Label("Cluster report: path of a saved `kb doctor --ray ADDRESS --json` file, then Enter", id="cluster-title")
        yield Input(value=str(self.start_path or ""), placeholder="report.json", id="cluster-path")
        yield Label("", id="cluster-status")
        with VerticalScroll(id="cluster-scroll"):
            yield Static("", id="cluster-body")
        yield Footer()

    def on_mount(self) -> None:
        if self.start_path is not None:
            self.load(self.start_path)
        else:
            self.query_one("#cluster-path", Input).focus()

    @on(Input.Submitted, "#cluster-path")
    def _submitted(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.load(Path(event.value.strip()).expanduser())

    def load(self, path: Path) -> None:
        status = self.query_one("#cluster-status", Label)
        try:
            report = load_cluster_report(path)
        except BadClusterReport as exc:
            status.update(Text(visible(str(exc))))  # Text, so markup-like characters in a path show as typed
            return
        nodes, unreachable, diffs = report["nodes"], report["unreachable"], report["differences"]
        status.update(Text(visible(f"{path}: {len(nodes)} node(s) answered, {len(unreachable)} unreachable, {len(diffs)} difference(s)")))
        self.query_one("#cluster-body", Static).update(Text(format_cluster_report(report)))
        self.query_one("#cluster-scroll", VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)
