"""docs/grafana-dashboard.json is a dashboard Grafana imports: valid JSON, the fields an import needs,
and every query names only series this server exports (as the console page's metrics table lists them)."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "docs" / "grafana-dashboard.json"
#: series the standard process and platform collectors export (not in the metrics table by name)
STANDARD = {"process_resident_memory_bytes"}


def documented_series() -> set[str]:
    page = (ROOT / "docs" / "console.md").read_text()
    names = set(re.findall(r"^\| `(mcp_harness_\w+)", page, re.M))
    return {re.sub(r"_total$", "", n) for n in names} | STANDARD


def test_the_grafana_dashboard_is_valid_and_queries_only_documented_series():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["title"] and dashboard["uid"] and isinstance(dashboard["schemaVersion"], int)
    known = documented_series()
    ids = set()
    for panel in dashboard["panels"]:
        assert panel["id"] not in ids and panel["title"] and panel["targets"]
        ids.add(panel["id"])
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24
        for target in panel["targets"]:
            used = set(re.findall(r"\b((?:mcp_harness|process)_\w+?)(?:_bucket|_total|_count|_sum)?\b", target["expr"]))
            assert used and used <= known, (panel["title"], used - known)
            assert target["expr"].count("(") == target["expr"].count(")")
