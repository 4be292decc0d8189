"""Versions read from a paste and from an entry's `versions` front matter (kb.search.versions)."""

from __future__ import annotations

import pytest

from kb.search.versions import entry_ranges, judge, paste_versions


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("pip install vllm==0.8.5", {"vllm": (0, 8, 5)}),
        ("I am on verl 0.7.1 with 8 GPUs", {"verl": (0, 7, 1)}),
        ("INFO 05-01 12:00:00 vLLM version 0.8.5", {"vllm": (0, 8, 5)}),
        ("(TaskRunner pid=1) verl version: 0.7.1", {"verl": (0, 7, 1)}),
        ("torch                     2.6.0+cu124\nvllm                      0.8.5.post1", {"torch": (2, 6, 0), "vllm": (0, 8, 5)}),
        ("Name: vllm\nVersion: 0.10.1\nSummary: ...", {"vllm": (0, 10, 1)}),
    ],
)
def test_paste_versions_from_pins_prose_pip_and_banners(text: str, want: dict) -> None:
    assert paste_versions(text) == want


def test_install_paths_carry_no_version() -> None:
    assert paste_versions('File "/usr/lib/python3.10/site-packages/vllm/worker/worker.py", line 12') == {}


def test_entry_ranges_read_closed_and_open_ends() -> None:
    r = entry_ranges("verl v0.4.1-v0.7.1 with trl >= 0.29; fixed in verl v0.8.0")
    assert r["verl"].low == (0, 4, 1) and r["verl"].high == (0, 8, 0) and r["verl"].fixed_in
    assert r["trl"].low == (0, 29) and r["trl"].high is None
    # the newest verl tag read is an open end: the fact still held there
    assert entry_ranges("verl v0.5.0-v0.9.0")["verl"].high is None
    assert entry_ranges("verl <= v0.4.1 installed under projects")["verl"].contains((0, 4, 1))
    assert not entry_ranges("verl <= v0.4.1 installed under projects")["verl"].contains((0, 5, 0))
    assert entry_ranges("whatever the maintainers said") == {}


def test_a_fix_of_one_cause_does_not_close_the_range_the_entry_states() -> None:
    # prompt-exceeds-max-length: the entry holds through v0.9.0; one of its causes was fixed in v0.5.0
    text = "verl v0.4.1-v0.9.0, vLLM 0.7-0.24 (cause 4: multimodal filtering v0.3.0.rc0-v0.4.1, fixed in v0.5.0)"
    r = entry_ranges(text)["verl"]
    assert r.low == (0, 4, 1) and r.high is None and not r.fixed_in
    assert r.contains((0, 6, 0))
    # a fix past the stated end still closes it
    assert entry_ranges("verl v0.4.1-v0.7.1; fixed in verl v0.8.0")["verl"].high == (0, 8, 0)


def test_a_paste_past_the_fix_is_excluded_and_says_why() -> None:
    j = judge({"verl": (0, 9, 0)}, entry_ranges("verl v0.4.0-v0.6.0; fixed in verl v0.6.1"))
    assert j.verdict == "excluded" and j.fixed
    assert j.text == "fixed in verl 0.6.1; this paste is from verl 0.9.0"
    assert judge({"verl": (0, 5, 0)}, entry_ranges("verl v0.4.0-v0.6.0; fixed in verl v0.6.1")).verdict == "included"
    assert judge({"vllm": (0, 8, 5)}, entry_ranges("verl v0.4.0-v0.6.0")).verdict == "unknown"
    older = judge({"verl": (0, 3, 0)}, entry_ranges("verl v0.6.0-v0.9.0"))
    assert older.text == "needs verl >= 0.6.0; this paste is from verl 0.3.0" and not older.fixed


def test_one_verl_tag_is_a_lower_bound_and_a_fix_closes_it() -> None:
    r = entry_ranges("verl v0.7.0 (Megatron backend, router replay R2), fixed in verl v0.7.1")["verl"]
    assert (r.low, r.high, r.fixed_in) == ((0, 7, 0), (0, 7, 1), True)
    assert not r.contains((0, 6, 1)) and r.contains((0, 7, 0)) and not r.contains((0, 7, 1))
    # without a fix the end stays open (prose often adds later tags); another package's lone version is no range
    assert entry_ranges("verl v0.7.1 (hardcoded card 1); v0.8.0-v0.9.0 still fail")["verl"].contains((0, 8, 0))
    assert "vllm" not in entry_ranges("verl v0.7.0 with vLLM 0.8.5")
    assert "verl" not in entry_ranges("verl v0.7.0 -> v0.7.1, v0.8.0: keys removed")



def test_a_fix_in_the_091_wheel_closes_the_range() -> None:
    """verl 0.9.1 has no tag in the mirror; entries read from its wheel say "fixed in the 0.9.1 wheel"."""
    for text in ("verl v0.7.0-v0.9.0, fixed in the 0.9.1 wheel", "verl v0.7.0-v0.9.0, fixed in the verl 0.9.1 wheel"):
        r = entry_ranges(text)["verl"]
        assert (r.low, r.high, r.fixed_in) == ((0, 7, 0), (0, 9, 1), True), text
        assert judge({"verl": (0, 9, 1)}, {"verl": r}).fixed
    # "still raised at the 0.9.1 wheel" keeps the end open
    assert entry_ranges("verl v0.6.0-v0.9.0; still raised at the 0.9.1 wheel")["verl"].contains((0, 9, 1))


def test_the_verl_version_of_a_pasted_diagnose_dump_is_read() -> None:
    """verl's issue form asks for `python scripts/diagnose.py`; its `verl Info` block says `Version : 0.7.0.dev`
    on a line that names no package, so only the block's header tells whose version it is."""
    dump = ("----------Python Info----------\nVersion      : 3.10.12\n------------Pip Info-----------\n"
            "Version      : 25.1.1\nvllm         :  0.10.0\n----------verl Info-----------\nVersion      : 0.7.0.dev\n"
            "Directory    : /root/verl/verl\n")
    found = paste_versions(dump)
    assert found["verl"] == (0, 7, 0) and found["vllm"] == (0, 10, 0)
    assert "python" not in found and "pip" not in found
