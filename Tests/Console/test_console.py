"""The operator's console (`/admin`) in a real headless browser: Debian's Chromium, driven by
its chromedriver through Selenium.

Run from the repository root, against a built server binary:

    OFFLINE_SYNC_BIN=.build/debug/offline-sync python3 -m unittest -v Tests/Console/test_console.py

Needs chromium, chromium-driver (apt) and selenium (pip); `make console-test` installs them.
Set OFFLINE_SYNC_CONSOLE_SCREENSHOT=PATH to save the signed-in page, explainer answer
included, as a PNG (Docs/console.png is made this way).

One `offline-sync serve` runs for the module, with the shared-lists rules and an admin key,
seeded over its HTTP API: alice's list L1 with bob as a member, bob's todo T1 in it, and
carol's refused attempt to add a todo to it.

  01  without the key the page is the sign-in form (401); a wrong key is refused on the page.
  02  the right key signs in: the page shows the tables with their row counts, the counters,
      and carol's refusal, and no field value of any row.
  03  the explainer, filled in and submitted in the browser, answers for alice, bob and carol
      what the rules engine answers (`POST /v1/admin/explain`) and what each one's pull
      returns: only bob, the list's member, reads the todo.
  04  signing out ends the session: the next load is the sign-in form again, and a copy of
      the signed-out cookie, sent afresh, is refused too.
  05  hostile values, stored through the server (an identity whose write the rules refuse,
      its item id, a table name) and given to the explainer (identity, roles, claims), each
      carrying `<script>`, quotes, `</td></tr>`, an `onerror` image, a quote before a
      combining mark and the bidirectional controls U+202E, U+2066 and U+2069: no script runs,
      no element or attribute is injected, no table row gains or loses a cell, every value
      reads literally as text with each bidirectional control shown as `[U+202E]`, the
      explainer's fields hold the values exactly, and the refusal's "why?" link carries them
      to the explainer unchanged.
"""

import json
import os
import shutil
import sys
import unicodedata
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Hostile"))
import test_auth as auth  # noqa: E402

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.common.exceptions import NoAlertPresentException, WebDriverException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.expected_conditions import staleness_of  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Fixtures", "shared-lists-rules.yaml")) as _rules:
    RULES = _rules.read()

S = auth.S


def gone(element):
    """A wait condition: the page a form posted to replaced the one holding `element`.
    Chromium's driver may report the old node as "not in the document" (a plain
    WebDriverException) instead of stale; both mean it is gone."""
    def check(driver):
        try:
            return staleness_of(element)(driver)
        except WebDriverException:
            return True
    return check

IDENTITIES = {"alice": auth.ALICE, "bob": auth.BOB, "carol": "us-east-1:cccccccc-0000-4000-8000-0000000ca201"}
FIELD_VALUES = ["groceries", "milk", "carol-was-here"]

# Test 05's values. Each payload, were it parsed as markup, would set window.__pwned or add an
# element or attribute the page never has; BIDI turns the text after it around.
BIDI = "\u202egnp.exe\u2066x\u2069"
HOSTILE_IDENTITY = ('<script>window.__pwned="identity"</script>"\'><img src=x onerror="window.__pwned=\'identity\'">'
                    '</td></tr>' + BIDI)
HOSTILE_ITEM = '</td></tr><script>window.__pwned="item"</script>"\'><svg onload="window.__pwned=\'item\'">' + BIDI
HOSTILE_TABLE = 't"\'></td><script>window.__pwned="table"</script>' + BIDI
HOSTILE_CLAIM = '<script>window.__pwned="claim"</script>"\'><img src=x onerror="window.__pwned=\'claim\'"></td>' + BIDI
# A claim with no "=": the explainer answers with an error that quotes it.
HOSTILE_BARE_CLAIM = '<script>alert("claim")</script>"\'></td></tr>' + BIDI
# A quote followed by a combining mark: one grapheme, which an escape that works by grapheme
# would pass through whole, ending the attribute it is in.
HOSTILE_QUOTE = 'x"\u0338 autofocus onfocus="window.__pwned=\'combining\'" y="\u0338'
# Unicode's Bidi_Control property.
BIDI_CONTROLS = {0x061C, 0x200E, 0x200F} | set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A))


def shown(text):
    """`text` as the console shows it: each bidirectional control, control character and line
    or paragraph separator as its code point, `[U+202E]`."""
    return "".join("[U+%04X]" % ord(c) if ord(c) in BIDI_CONTROLS or unicodedata.category(c) in ("Cc", "Zl", "Zp") else c
                   for c in text)


# Whether the page holds anything no console page has: an element that runs or loads
# something, an event handler or autofocus attribute, or a script's mark.
INJECTED = """
    const found = [];
    if (window.__pwned !== undefined) found.push("window.__pwned = " + window.__pwned);
    for (const e of document.querySelectorAll("script, img, svg, iframe, object, embed, link, meta[http-equiv], base"))
        found.push("<" + e.tagName.toLowerCase() + ">");
    for (const e of document.querySelectorAll("*"))
        for (const a of e.attributes)
            if (a.name.startsWith("on") || a.name === "autofocus" || a.name === "src") found.push(e.tagName + "[" + a.name + "]");
    return found;
"""


def push(token, operations):
    status, _, body = auth.send("POST", "/v1/push", auth.jbody({"operations": operations}),
                                dict(auth.JSON_HEADERS, **auth.bearer(token)))
    if status != 200:
        raise RuntimeError("push answered %d: %s" % (status, body[:300]))
    return [result["outcome"] for result in json.loads(body)["results"]]


def op(op_id, table, item, fields):
    return {"id": op_id, "table": table, "itemId": item, "kind": "insert", "item": {"id": item, "fields": fields}}


def chromedriver():
    for path in (shutil.which("chromedriver"), "/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"):
        if path and os.path.exists(path):
            return path
    raise RuntimeError("no chromedriver: install chromium-driver (make console-test does)")


def setUpModule():
    auth.start_with_rules(RULES, _seed)


def _seed(server):
    """The tokens, alice's list with bob as a member, bob's todo, carol's refused todo, and
    the browser."""
    S.tokens = {name: server.mint(identity) for name, identity in IDENTITIES.items()}
    applied = push(S.tokens["alice"], [op("a1", "lists", "L1", {"name": "groceries"}),
                                       op("a2", "list_members", "m-bob", {"list_id": "L1", "user_id": auth.BOB})])
    applied += push(S.tokens["bob"], [op("b1", "todos", "T1", {"list_id": "L1", "title": "milk"})])
    if applied != ["applied"] * 3:
        raise RuntimeError("seeding failed: %s" % applied)
    refused = push(S.tokens["carol"], [op("c1", "todos", "T2", {"list_id": "L1", "title": "carol-was-here"})])
    if refused != ["rejected"]:
        raise RuntimeError("carol's write was not refused: %s" % refused)
    options = Options()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1200,1600"):
        options.add_argument(argument)
    S.browser = webdriver.Chrome(service=Service(chromedriver()), options=options)
    S.browser.set_page_load_timeout(60)


def tearDownModule():
    browser = getattr(S, "browser", None)
    if browser is not None:
        browser.quit()
    if S.server is not None:
        code = S.server.stop()
        if code != 0:
            raise RuntimeError("the server exited with %s on SIGTERM" % code)


def url(path):
    return "http://%s:%d%s" % (S.host, S.port, path)


class ConsoleInABrowser(unittest.TestCase):
    def sign_in(self, key):
        """Signs in from a fresh start (no session cookie) and waits for the answer's page."""
        S.browser.delete_all_cookies()
        S.browser.get(url("/admin"))
        field = S.browser.find_element(By.ID, "key")
        field.clear()
        field.send_keys(key)
        S.browser.find_element(By.ID, "sign-in").click()
        WebDriverWait(S.browser, 30).until(gone(field))

    def test_01_without_the_key_the_page_is_the_sign_in_form(self):
        status, _, body = auth.send("GET", "/admin", None, {})
        self.assertEqual(status, 401)
        S.browser.get(url("/admin"))
        S.browser.delete_all_cookies()
        S.browser.get(url("/admin"))
        self.assertEqual(S.browser.title, "OfflineSync console: sign in")
        self.assertEqual(S.browser.find_elements(By.ID, "tables"), [])
        self.sign_in("not-the-admin-key")
        self.assertIn("That is not the admin key.", S.browser.find_element(By.ID, "login-error").text)
        self.assertEqual(S.browser.find_elements(By.ID, "tables"), [])

    def test_02_the_key_opens_the_console(self):
        self.sign_in(auth.ADMIN_KEY)
        self.assertEqual(S.browser.title, "OfflineSync console")
        tables = {row.find_elements(By.TAG_NAME, "td")[0].text: row.find_elements(By.TAG_NAME, "td")[1].text
                  for row in S.browser.find_elements(By.CSS_SELECTOR, "#tables tr") if row.find_elements(By.TAG_NAME, "td")}
        self.assertEqual(tables, {"lists": "1", "list_members": "1", "todos": "1"})
        refusals = [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")][1:5]
                    for row in S.browser.find_elements(By.CSS_SELECTOR, "#refusals tr") if row.find_elements(By.TAG_NAME, "td")]
        self.assertEqual(refusals, [[IDENTITIES["carol"], "todos", "insert", "T2"]])
        counters = S.browser.find_element(By.ID, "counters").text
        self.assertIn("rule refusals (403) 1", counters)
        page = S.browser.page_source
        for value in FIELD_VALUES:
            self.assertNotIn(value, page, "the console shows a row's field")

    def test_03_the_explainer_answers_as_the_rules_engine(self):
        self.sign_in(auth.ADMIN_KEY)
        for name, identity in IDENTITIES.items():
            with self.subTest(identity=name):
                for field, value in (("identity", identity), ("table", "todos"), ("id", "T1"), ("roles", ""), ("claims", "")):
                    element = S.browser.find_element(By.ID, field)
                    element.clear()
                    if value:
                        element.send_keys(value)
                button = S.browser.find_element(By.ID, "explain")
                button.click()
                WebDriverWait(S.browser, 30).until(gone(button))
                shown = {row.get_attribute("data-operation"): row.get_attribute("data-allowed") == "true"
                         for row in S.browser.find_elements(By.CSS_SELECTOR, "#explanation tr[data-operation]")}
                status, _, body = auth.send("POST", "/v1/admin/explain",
                                            auth.jbody({"identity": identity, "table": "todos", "id": "T1"}),
                                            dict(auth.JSON_HEADERS, **{"X-Admin-Key": auth.ADMIN_KEY}))
                self.assertEqual(status, 200, body)
                engine = {d["operation"]: d["allowed"] for d in json.loads(body)["decisions"]}
                self.assertEqual(shown, engine)
                status, _, body = auth.send("POST", "/v1/pull", auth.jbody({"table": "todos"}),
                                            dict(auth.JSON_HEADERS, **auth.bearer(S.tokens[name])))
                pulled = any(record["id"] == "T1" for record in json.loads(body)["records"])
                self.assertEqual(shown["read"], pulled)
                # Only list members read its todos: bob; alice owns the list without being a member.
                self.assertEqual(shown["read"], name == "bob")
                if name == "carol":
                    self.assertIn("no live row of 'list_members'", S.browser.find_element(By.ID, "explanation").text)
                    screenshot = os.environ.get("OFFLINE_SYNC_CONSOLE_SCREENSHOT")
                    if screenshot:
                        S.browser.save_screenshot(screenshot)

    def test_04_signing_out_ends_the_session(self):
        self.sign_in(auth.ADMIN_KEY)
        session = S.browser.get_cookie("osync_console")
        self.assertIsNotNone(session)
        button = S.browser.find_element(By.CSS_SELECTOR, "form[action='/admin/logout'] button")
        button.click()
        WebDriverWait(S.browser, 30).until(gone(button))
        self.assertIn("Signed out.", S.browser.page_source)
        S.browser.get(url("/admin"))
        self.assertEqual(S.browser.title, "OfflineSync console: sign in")
        # A copy of the cookie (another tab's, a thief's) is refused too: the session ended.
        status, _, body = auth.send("GET", "/admin", None, {"Cookie": "osync_console=" + session["value"]})
        self.assertEqual(status, 401)
        self.assertIn(b'action="/admin/login"', body)

    def assert_clean(self, where):
        """Nothing was injected into the page, and no script ran or raised a dialog."""
        try:
            alert = S.browser.switch_to.alert
            text = alert.text
            alert.dismiss()
            self.fail("%s: a dialog opened: %r" % (where, text))
        except NoAlertPresentException:
            pass
        self.assertEqual(S.browser.execute_script(INJECTED), [], where)
        text = S.browser.execute_script("return document.body.textContent")
        for control in sorted(BIDI_CONTROLS):
            self.assertNotIn(chr(control), text, "%s: a raw U+%04X in the page's text" % (where, control))

    def cells(self, table_id):
        return [[cell.get_attribute("textContent") for cell in row.find_elements(By.TAG_NAME, "td")]
                for row in S.browser.find_elements(By.CSS_SELECTOR, "#%s tr" % table_id)
                if row.find_elements(By.TAG_NAME, "td")]

    def test_05_hostile_values_are_shown_as_text(self):
        S.tokens["hostile"] = S.server.mint(HOSTILE_IDENTITY)
        refused = push(S.tokens["hostile"], [op("h1", "todos", HOSTILE_ITEM, {"list_id": "L1", "title": "x"})])
        self.assertEqual(refused, ["rejected"])
        applied = push(S.tokens["alice"], [op("h2", HOSTILE_TABLE, "r1", {"n": 1})])
        self.assertEqual(applied, ["applied"])

        self.sign_in(auth.ADMIN_KEY)
        self.assertEqual(S.browser.title, "OfflineSync console")
        self.assert_clean("the console")
        # Every row keeps its cells: no value closed one or opened another.
        refusals = self.cells("refusals")
        self.assertTrue(all(len(row) == 6 for row in refusals), refusals)
        self.assertIn([shown(HOSTILE_IDENTITY), "todos", "insert", shown(HOSTILE_ITEM)], [row[1:5] for row in refusals])
        tables = self.cells("tables")
        self.assertTrue(all(len(row) == 3 for row in tables), tables)
        self.assertIn(shown(HOSTILE_TABLE), [row[0] for row in tables])
        marks = [span.get_attribute("textContent") for span in S.browser.find_elements(By.CSS_SELECTOR, "#refusals .ctl")]
        self.assertIn("[U+202E]", marks)
        self.assertIn("[U+2066]", marks)

        # The refusal's "why?" link carries its values to the explainer unchanged.
        row = next(row for row in S.browser.find_elements(By.CSS_SELECTOR, "#refusals tr")
                   if row.find_elements(By.TAG_NAME, "td")
                   and row.find_elements(By.TAG_NAME, "td")[1].get_attribute("textContent") == shown(HOSTILE_IDENTITY))
        link = row.find_element(By.TAG_NAME, "a")
        link.click()
        WebDriverWait(S.browser, 30).until(gone(link))
        self.assert_clean("the explainer opened from a refusal")
        for field, value in (("identity", HOSTILE_IDENTITY), ("table", "todos"), ("id", HOSTILE_ITEM)):
            self.assertEqual(S.browser.find_element(By.ID, field).get_property("value"), value, field)

        # The explainer, asked with hostile values in every field.
        query = urllib.parse.urlencode({"identity": HOSTILE_IDENTITY, "table": HOSTILE_TABLE, "id": HOSTILE_ITEM,
                                        "roles": HOSTILE_QUOTE, "claims": "team=" + HOSTILE_CLAIM}, quote_via=urllib.parse.quote)
        S.browser.get(url("/admin?" + query))
        self.assert_clean("the explainer's answer")
        for field, value in (("identity", HOSTILE_IDENTITY), ("table", HOSTILE_TABLE), ("id", HOSTILE_ITEM),
                             ("roles", HOSTILE_QUOTE), ("claims", "team=" + HOSTILE_CLAIM)):
            self.assertEqual(S.browser.find_element(By.ID, field).get_property("value"), value, field)
        summary = S.browser.find_element(By.ID, "explain-summary").get_attribute("textContent")
        self.assertIn(shown(HOSTILE_TABLE), summary)
        self.assertIn(shown(HOSTILE_ITEM), summary)
        self.assertTrue(S.browser.find_elements(By.CSS_SELECTOR, "#explanation tr[data-operation]"))

        # Claims that are not name=value come back in the error message, as text.
        query = urllib.parse.urlencode({"identity": "bob", "table": "todos", "id": "T1", "claims": HOSTILE_BARE_CLAIM},
                                       quote_via=urllib.parse.quote)
        S.browser.get(url("/admin?" + query))
        self.assert_clean("the explainer's error")
        error = S.browser.find_element(By.ID, "explain-error").get_attribute("textContent")
        self.assertEqual(error, "a claim is name=value, not '%s'" % shown(HOSTILE_BARE_CLAIM))
        self.assertEqual(S.browser.find_element(By.ID, "claims").get_property("value"), HOSTILE_BARE_CLAIM)


if __name__ == "__main__":
    unittest.main()
