"""A scope is a canonical set of DIDs and contentIds: its id ignores order
and repeats; a malformed member, an empty or an oversized scope is refused
with one line, from the library, a scope file and the wire alike."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from relay.scope import MAX_SCOPE_MEMBERS, ScopeError, load_scope_file, parse_scope

DID_A = "did:dfos:" + "a" * 22
DID_B = "did:dfos:" + "2" * 22
CONTENT = "c" * 22
_DIGITS = str.maketrans("0123456789", "2346789acd")  # decimal digits into the id alphabet


def fake_did(n: int) -> str:
    return "did:dfos:" + f"{n:022d}".translate(_DIGITS)


def test_the_scope_id_ignores_order_repeats_and_separators() -> None:
    one = parse_scope(f"{DID_A},{CONTENT},{DID_B}")
    two = parse_scope([DID_B, CONTENT, DID_A, DID_A])
    three = parse_scope(f" {CONTENT} {DID_B}\n{DID_A} ")
    assert one == two == three
    assert one.scope_id == two.scope_id and one.scope_id.startswith("scope:")
    assert one.dids == tuple(sorted((DID_A, DID_B))) and one.content_ids == (CONTENT,)
    assert parse_scope(DID_A).scope_id != one.scope_id


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "empty"),
        (" , ,", "empty"),
        ("did:dfos:short", "not a did:dfos DID or contentId"),
        (f"{DID_A},did:web:example.com", "not a did:dfos DID or contentId"),
    ],
)
def test_bad_scopes_are_refused_with_one_line(value: str, message: str) -> None:
    with pytest.raises(ScopeError) as caught:
        parse_scope(value)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_single_well_formed_member_is_a_scope() -> None:
    assert parse_scope(fake_did(1)).dids == (fake_did(1),)


def test_an_oversized_scope_is_refused() -> None:
    members = [fake_did(n) for n in range(MAX_SCOPE_MEMBERS + 1)]
    assert len(set(members)) == MAX_SCOPE_MEMBERS + 1
    parse_scope(members[:MAX_SCOPE_MEMBERS])
    with pytest.raises(ScopeError, match=f"more than {MAX_SCOPE_MEMBERS} members"):
        parse_scope(members)


def test_scope_files_in_json_list_and_text_forms(tmp_path: Path) -> None:
    expected = parse_scope([DID_A, CONTENT])
    forms = {
        "object.json": f'{{"dids": ["{DID_A}"], "contentIds": ["{CONTENT}"]}}',
        "list.json": f'["{CONTENT}", "{DID_A}"]',
        "lines.txt": f"# who we mirror\n{DID_A}   # the author\n\n{CONTENT}\n",
    }
    for name, text in forms.items():
        (tmp_path / name).write_text(text)
        assert load_scope_file(tmp_path / name) == expected
        # as some editors save them: a UTF-8 byte order mark first
        (tmp_path / f"bom-{name}").write_text(text, encoding="utf-8-sig")
        assert load_scope_file(tmp_path / f"bom-{name}") == expected
    (tmp_path / "bad.json").write_text('{"dids": [1]}')
    (tmp_path / "keys.json").write_text('{"people": []}')
    for name, fragment in [
        ("bad.json", "must be strings"),
        ("keys.json", "unknown keys"),
        ("missing.txt", "cannot read scope file"),
    ]:
        with pytest.raises(ScopeError, match=fragment):
            load_scope_file(tmp_path / name)


@pytest.mark.parametrize("path", ["/log", "/changes"])
async def test_bad_scopes_on_the_wire_are_400_with_a_json_error(
    client: httpx.AsyncClient, path: str
) -> None:
    for query in ("scope=", "scope=nonsense", f"scope={DID_A}&scope={DID_B}"):
        response = await client.get(f"{path}?{query}")
        assert response.status_code == 400, (path, query)
        assert "scope" in response.json()["error"]
    oversized = ",".join(fake_did(n) for n in range(MAX_SCOPE_MEMBERS + 1))
    response = await client.get(f"{path}?scope={oversized}")
    assert response.status_code == 400 and "members" in response.json()["error"]
