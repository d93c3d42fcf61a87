"""`icelog dev-idp` as a newcomer runs it: the real command, an `icelog serve` started with
exactly the variables it printed, engines' client credentials through icelog's token
endpoint, and the console's login through its login page in Chromium. Adversarial: it will
not listen where other machines reach it unless told, and bob's token reads only the
namespace he was granted."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.e2e.test_console import CHROMIUM, CHROMIUM_ARGS, WIDE
from tests.support.clients import rest_catalog
from tests.support.fixtures import ServerFactory
from tests.support.server import ICELOG_BIN, REPO_ROOT, CatalogServer, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SCHEMA = pa.schema([("id", pa.int64()), ("amount", pa.float64())])


@dataclass
class DevIdp:
    uri: str
    printed: list[str]
    exports: dict[str, str]

    def token(self, name: str, secret: str) -> str:
        answer = httpx.post(
            f"{self.uri}/token", data={"grant_type": "client_credentials"}, auth=(name, secret)
        )
        assert answer.status_code == 200, answer.text
        return str(answer.json()["access_token"])


@pytest.fixture(scope="module")
def dev_idp() -> Iterator[DevIdp]:
    port = free_port()
    process = subprocess.Popen(
        [str(ICELOG_BIN), "dev-idp", "--port", str(port),
         "--user", "alice", "--user", "bob", "--user", "carol:c4rol"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    printed: list[str] = []
    for line in process.stdout:
        printed.append(line.rstrip("\n"))
        if "Stop with Ctrl-C" in line:
            break
    exports = dict(
        line.removeprefix("export ").split("=", 1) for line in printed if line.startswith("export ")
    )
    try:
        yield DevIdp(exports.get("ICELOG_OPENID_PROVIDER_URI", ""), printed, exports)
    finally:
        process.terminate()  # SIGTERM: it stops cleanly
        assert process.wait(timeout=10) == 0


@pytest.fixture(scope="module")
def server(catalog_server_factory: ServerFactory, dev_idp: DevIdp) -> CatalogServer:
    """icelog started with what dev-idp printed; alice bootstraps it and writes `sales`
    and `hr`, a table each."""
    server = catalog_server_factory("sqlite", env=dev_idp.exports)
    alice = {"Authorization": f"Bearer {dev_idp.token('alice', 'alice-secret')}"}
    done = httpx.post(
        f"{server.base}/management/v1/bootstrap", json={"accept-terms-of-use": True},
        headers=alice,
    )  # fmt: skip
    assert done.status_code == 204, done.text
    catalog = rest_catalog(server, credential="alice:alice-secret")
    for namespace, table in (("sales", "orders"), ("hr", "salaries")):
        catalog.create_namespace(namespace)
        created = catalog.create_table(f"{namespace}.{table}", SCHEMA)
        created.append(pa.table({"id": [1], "amount": [1.5]}, schema=SCHEMA))
    return server


def _grant_select_on(server: CatalogServer, dev_idp: DevIdp, namespace: str, user: str) -> str:
    """alice grants `user` select on `namespace` (and nothing else); the warehouse id."""
    alice = {"Authorization": f"Bearer {dev_idp.token('alice', 'alice-secret')}"}
    management = f"{server.base}/management/v1"
    warehouse = httpx.get(f"{management}/warehouse", headers=alice).json()["warehouses"][0]["id"]
    found = httpx.get(
        f"{management}/warehouse/{warehouse}/namespace-id",
        params={"namespace": namespace}, headers=alice,
    )  # fmt: skip
    namespace_id = found.json()["namespace-id"]
    granted = httpx.post(
        f"{management}/permissions/namespace/{namespace_id}/assignments",
        json={"writes": [{"type": "select", "user": user}]}, headers=alice,
    )  # fmt: skip
    assert granted.status_code == 204, granted.text
    return str(warehouse)


def test_it_prints_what_icelog_needs_once_it_listens(dev_idp: DevIdp) -> None:
    assert set(dev_idp.exports) == {
        "ICELOG_OPENID_PROVIDER_URI", "ICELOG_OPENID_AUDIENCE", "ICELOG_CONSOLE_INSECURE_COOKIES",
    }  # fmt: skip
    assert dev_idp.exports["ICELOG_OPENID_AUDIENCE"] == "icelog"
    text = "\n".join(dev_idp.printed)
    for credential in ("alice:alice-secret", "bob:bob-secret", "carol:c4rol"):
        assert f"credential {credential}" in text
    found = httpx.get(f"{dev_idp.uri}/.well-known/openid-configuration").json()
    assert found["issuer"] == dev_idp.uri
    assert httpx.get(found["jwks_uri"]).json()["keys"]


def test_a_named_users_client_credentials_work_through_icelog(
    server: CatalogServer, dev_idp: DevIdp
) -> None:
    """What Spark, PyIceberg and DuckDB do with `credential=carol:c4rol` and nothing but
    the catalog URI: icelog's token endpoint passes it to dev-idp's."""
    tokens = f"{server.uri}/v1/oauth/tokens"
    form = {"grant_type": "client_credentials", "client_id": "carol", "client_secret": "c4rol",
            "scope": "catalog"}  # fmt: skip
    answer = httpx.post(tokens, data=form)
    assert answer.status_code == 200, answer.text
    who = httpx.get(
        f"{server.base}/management/v1/whoami",
        headers={"Authorization": f"Bearer {answer.json()['access_token']}"},
    ).json()
    assert (who["id"], who["name"]) == ("oidc~carol", "carol")
    wrong = httpx.post(tokens, data={**form, "client_secret": "carol-secret"})
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        found = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield found
        found.close()


def _log_in(browser: Browser, server: CatalogServer, *, button: str = "", typed: str = "") -> Page:
    """A browser that logged in to the console on dev-idp's page: by a user's button, or
    by typing a name."""
    page = browser.new_context(viewport=WIDE, base_url=server.base).new_page()
    page.goto("/ui/projects")
    page.locator("[data-login-button]").click()  # to dev-idp's login page
    expect(page.locator("h1")).to_have_text("Sign in")
    expect(page.locator(".warning")).to_contain_text("anyone can sign in as anyone")
    if button:
        page.locator(f"button[data-user='{button}']").click()
    else:
        page.fill("input[name=name]", typed)
        page.locator("[data-sign-in]").click()
    expect(page.locator("header .who")).to_contain_text(button or typed)
    return page


def test_the_login_page_signs_users_into_the_console(
    browser: Browser, server: CatalogServer, dev_idp: DevIdp
) -> None:
    """The walkthrough's console path: alice (her button) grants dave `select` on `sales`
    on its assignments page; dave (a name typed in) then sees `sales` and not `hr`."""
    alice = _log_in(browser, server, button="alice")
    try:
        expect(alice.locator("h1")).to_have_text("Projects")
        warehouse = httpx.get(
            f"{server.base}/management/v1/warehouse",
            headers={"Authorization": f"Bearer {dev_idp.token('alice', 'alice-secret')}"},
        ).json()["warehouses"][0]["id"]
        alice.goto(f"/ui/warehouses/{warehouse}/namespace?ns=sales")
        expect(alice.locator("h1")).to_have_text("Namespace sales")
        alice.locator("[data-my-access] [data-assignments-link]").click()
        grant = alice.locator("[data-grant-form]")
        grant.locator("select[name=relation]").select_option("select")
        grant.locator("input[name=user-id]").fill("oidc~dave")
        grant.get_by_role("button", name="Grant").click()
        expect(alice.locator(".banner.ok")).to_have_text("Granted select to oidc~dave")
    finally:
        alice.context.close()
    dave = _log_in(browser, server, typed="dave")
    try:
        dave.goto(f"/ui/warehouses/{warehouse}/namespace?ns=sales")
        expect(dave.get_by_role("link", name="orders", exact=True)).to_be_visible()
        hidden = dave.goto(f"/ui/warehouses/{warehouse}/namespace?ns=hr")
        assert hidden is not None and hidden.status == 404
    finally:
        dave.context.close()


@pytest.mark.attack
def test_bobs_token_reads_sales_and_nothing_of_hr(server: CatalogServer, dev_idp: DevIdp) -> None:
    warehouse = _grant_select_on(server, dev_idp, "sales", "oidc~bob")
    bob = {"Authorization": f"Bearer {dev_idp.token('bob', 'bob-secret')}"}
    catalog = f"{server.uri}/v1/{warehouse}"

    def status(path: str, method: str = "GET", **kwargs: Any) -> int:
        return httpx.request(method, f"{catalog}{path}", headers=bob, **kwargs).status_code

    assert status("/namespaces/sales/tables/orders") == 200
    listed = httpx.get(f"{catalog}/namespaces", headers=bob).json()["namespaces"]
    assert listed == [["sales"]]
    for path in ("/namespaces/hr", "/namespaces/hr/tables", "/namespaces/hr/tables/salaries",
                 "/namespaces/hr/tables/salaries/credentials"):  # fmt: skip
        assert status(path) == 404, path
    assert status("/namespaces/hr/tables/salaries", "HEAD") == 404
    # Not by renaming it into his namespace, nor by writing to it.
    renamed = {"source": {"namespace": ["hr"], "name": "salaries"},
               "destination": {"namespace": ["sales"], "name": "salaries"}}  # fmt: skip
    assert status("/tables/rename", "POST", json=renamed) in (403, 404)
    assert status("/namespaces/hr/tables/salaries", "POST", json={"updates": []}) == 404
    # Nor by signing in with his secret as someone else at the provider.
    stolen = httpx.post(
        f"{dev_idp.uri}/token", data={"grant_type": "client_credentials"},
        auth=("alice", "bob-secret"),
    )  # fmt: skip
    assert stolen.status_code == 401


@pytest.mark.attack
def test_it_will_not_listen_where_other_machines_reach_it_unless_told() -> None:
    port = free_port()
    done = subprocess.run(
        [str(ICELOG_BIN), "dev-idp", "--host", "0.0.0.0", "--port", str(port)],  # noqa: S104
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stdout == "" and "refusing to listen on 0.0.0.0" in done.stderr
    with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
        probe.connect(("127.0.0.1", port))
    # Told, it listens there, and says what that means.
    told = subprocess.Popen(
        [str(ICELOG_BIN), "dev-idp", "--host", "0.0.0.0", "--port", str(port),  # noqa: S104
         "--allow-remote", "--issuer", f"http://127.0.0.1:{port}"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert told.stdout is not None and told.stderr is not None
        first = told.stdout.readline()
        assert first.startswith(
            f"icelog dev-idp: an OpenID provider for development at http://127.0.0.1:{port}"
        )
        warning = told.stderr.readline()
        assert warning.startswith("WARNING: icelog dev-idp listens on 0.0.0.0")
        assert "anyone who reaches it can sign in as anyone" in warning
    finally:
        told.terminate()
        told.wait(timeout=10)
