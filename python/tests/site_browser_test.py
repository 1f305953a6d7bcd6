#!/usr/bin/env python3
"""`kvconform site` end to end, checked in headless Chromium (ctest site_browser, label browser).

    python3 python/tests/site_browser_test.py build/cli/kvconform [OUT_DIR]

Writes three real report folders with the built binary (the oracle engine told a wrong window, a
zero-logits engine with one plan a known deviation, and a kernel run whose window mutant fails with a
mask picture), builds the site from them, and opens it in Chromium: the matrix's filters (from the address's #hash)
leave exactly the cases they name and the counts are taken over them; every FAIL and DEVIATION has its
page, with its diagnosis, reproduce line and (for the kernel failure) the mask picture; the finding is
reported with its configuration; the same reports give the same bytes; a bad folder is a clear error.
Screenshots stay under OUT_DIR (default build/site-test) for a person to look at.

Each check is also run on two mutants of the written site, and must fail on them: the filter script
hides nothing, and one case page is missing. Exit 77 (ctest SKIP) when Chromium is not installed
(KVC_WITH_BROWSER=1 scripts/setup.sh installs it).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP = 77


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, binary, profile):
        self.binary, self.profile = binary, profile

    def flags(self):
        # A private profile folder: no clash with another Chromium, nothing left in $HOME.
        return [self.binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                f"--user-data-dir={self.profile}"]

    def dom(self, url):
        done = subprocess.run(self.flags() + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
        return done.stdout

    def screenshot(self, url, png, height=1400):
        if os.path.exists(png):
            os.remove(png)
        subprocess.run(self.flags() + [f"--window-size=1400,{height}", f"--screenshot={png}", url],
                       capture_output=True, timeout=120)
        return os.path.exists(png) and os.path.getsize(png) > 10000  # a blank page is a few hundred bytes


def run(cmd, ok=(0, 1), **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, **kw)
    if done.returncode not in ok:
        sys.exit(f"site_browser: {' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return done


# A stand-in engine that answers every position with zero logits: every plan it runs FAILs, and the
# one its expectation names is reported as a known deviation (the oracle engine is never one: a
# mutant run ignores known deviations).
ZEROS_ENGINE = """import json, os, struct
import kvconform


class Zeros(kvconform.Engine):
    name = "zeros"

    def load(self, model_dir, options, mutant, max_tokens, sequences):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.vocab = json.load(f)["vocab_size"]
        return self.vocab

    def reset(self):
        pass

    def extend(self, seq, tokens):
        return struct.pack("<%df" % (len(tokens) * self.vocab), *([0.0] * (len(tokens) * self.vocab)))


if __name__ == "__main__":
    kvconform.serve_engine(Zeros())
"""
NOTE = "site test: an engine that answers zero logits"


def make_reports(kvconform, out):
    """Three report folders written by the binary, the way a user's runs write them: the oracle engine
    told a window one too wide (FAILs with their diagnosis and pictures), the zero-logits engine (a
    FAIL and a known deviation), and the kernels' backend suite beside a window mutant's property
    failure (a mask picture)."""
    engine_script = os.path.join(out, "zeros_engine.py")
    with open(engine_script, "w") as f:
        f.write(ZEROS_ENGINE)
    # The known-deviation file in the form this build reads: per-engine expectations files
    # (--expectations) or the one known-deviations file (--known).
    help_text = run([kvconform, "engine", "--help"], ok=(0,)).stdout
    if "--expectations" in help_text:
        known = os.path.join(out, "expectations.jsonc")
        entry = {"case": "^engine/zeros/gemma2-w4/decode_across_w", "outcome": "fail", "failure": "logits", "reason": NOTE}
        flag = "--expectations"
        body = {"expectations": [entry]}
    else:
        known = os.path.join(out, "known.json")
        entry = {"engine": "^zeros$", "model": "^gemma2-w4$", "plan": "^decode_across_w$", "failure": "logits", "note": NOTE}
        flag = "--known"
        body = {"deviations": [entry]}
    with open(known, "w") as f:
        json.dump(body, f)
    oracle, zeros, kernel = (os.path.join(out, n) for n in ("oracle-report", "zeros-report", "kernel-report"))
    plans = "/(prefill_gt_w|decode_across_w)$"
    run([kvconform, "engine", "--engine", "^oracle$", "--model", "^gemma2-w4$", "--no-regressions", "--filter", plans,
         "--mutant", "window_off_by_one+1", "--report-dir", oracle])
    run([kvconform, "engine", "--engine-cmd", f"{sys.executable} {engine_script}", "--engine-name", "zeros",
         "--model", "^gemma2-w4$", "--no-regressions", "--filter", plans, flag, known, "--report-dir", zeros])
    run([kvconform, "run", "-v", "--case", "^no golden case$", "--property", "^(backends_vs_oracle|window_coverage)$",
         "--iterations", "20", "--mutant", "window_off_by_one+1",
         "--filter", "^(backend/(decode_across_window|chunked_across_chunks)/|property/window_coverage)", "--report-dir", kernel])
    return [oracle, zeros, kernel], known


def cases_of(report_dirs):
    by_id = {}
    for d in report_dirs:
        with open(os.path.join(d, "summary.json")) as f:
            for c in json.load(f)["cases"]:
                by_id[c["id"]] = c
    return list(by_id.values())


def file_url(path, hash_=""):
    return "file://" + os.path.abspath(path) + (("#" + hash_) if hash_ else "")


def check(site, cases, browser):
    """Every problem a person would see, as text, one at a time (a mutant's check stops at the first:
    each of its browser loads costs seconds); none when the site is right."""
    fails = [c for c in cases if c["status"] == "FAIL"]
    devs = [c for c in cases if c["status"] == "DEVIATION"]
    engine_fails = [c for c in fails if c["suite"] == "engine" and c["backend"] == "oracle"]
    if not fails or not devs or not engine_fails:
        yield f"the reports lack a FAIL or a DEVIATION ({len(fails)} FAIL, {len(devs)} DEVIATION): the test proves nothing"
        return

    # The matrix filtered from the address: only the oracle's failures, and their counts.
    dom = browser.dom(file_url(os.path.join(site, "matrix.html"), "config=oracle&status=FAIL"))
    if 'data-filtered="yes"' not in dom:
        yield ("matrix.html: the filter script did not run")
    rows = re.findall(r"<tr class=\"[a-z]+\" data-config=\"([^\"]*)\".*?data-status=\"([A-Z]+)\"( hidden=\"\")?>", dom)
    shown = [(cfg, st) for cfg, st, hidden in rows if not hidden]
    if len(rows) != len(cases):
        yield (f"matrix.html: {len(rows)} case rows, the reports have {len(cases)}")
    if sorted(shown) != sorted(("oracle", "FAIL") for _ in engine_fails):
        yield (f"matrix.html#config=oracle&status=FAIL shows {len(shown)} rows ({sorted(set(shown))}), "
                        f"expected the {len(engine_fails)} FAIL of oracle")
    if f">{len(engine_fails)} of {len(cases)} cases shown<" not in dom:
        yield (f"matrix.html: no '{len(engine_fails)} of {len(cases)} cases shown'")
    pivot = re.search(r'<table id="pivot">(.*?)</table>', dom, re.S)
    pivot_text = pivot.group(1) if pivot else ""
    if f">{len(engine_fails)} FAIL<" not in pivot_text or "DEVIATION" in pivot_text or " OK<" in pivot_text:
        yield (f"matrix.html: the configuration x family counts are not those of the filtered rows: {pivot_text[:300]}")

    # One page per FAIL and DEVIATION, linked from the matrix, with its diagnosis and reproduce line.
    matrix = open(os.path.join(site, "matrix.html")).read()
    for c in fails + devs:
        link = re.search(r'<a href="(cases/[^"]+\.html)">' + re.escape(c["id"].replace("&", "&amp;")) + "</a>", matrix)
        if not link:
            yield (f"matrix.html: no link to the page of {c['id']}")
            continue
        page = os.path.join(site, link.group(1))
        if not os.path.isfile(page):
            yield (f"{link.group(1)}: missing (the page of {c['id']})")
            continue
        text = open(page).read()
        if c["message"][:60].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") not in text:
            yield (f"{link.group(1)}: no diagnosis ({c['message'][:60]})")
        if c["reproduce"] and "class=\"cmd\"" not in text:
            yield (f"{link.group(1)}: no reproduce line")
    # The kernel failure's page in the browser: its mask picture with the mismatch marked.
    kernel_fail = next((c for c in fails if c["suite"] == "property" and c.get("masks")), None)
    if kernel_fail is None:
        yield ("the kernel report has no failure with a mask picture")
    else:
        link = re.search(r'<a href="(cases/[^"]+\.html)">' + re.escape(kernel_fail["id"]) + "</a>", matrix)
        if link and os.path.isfile(os.path.join(site, link.group(1))):
            page_dom = browser.dom(file_url(os.path.join(site, link.group(1))))
            if "class=\"heatmap\"" not in page_dom or "class=\"mismatch\"" not in page_dom or "<svg" not in page_dom:
                yield (f"{link.group(1)}: no mask picture with its mismatch")

    # The finding: reported, with the configuration and version it was seen in.
    dom = browser.dom(file_url(os.path.join(site, "findings.html")))
    row = re.search(r'<tr id="finding-1" class="dev" data-state="dev">(.*?)</tr>', dom, re.S)
    if not row:
        yield ("findings.html: the known deviation is not reported as seen")
    elif "<code>zeros</code> (" not in row.group(1):
        yield ("findings.html: the finding does not name the configuration and version it was seen in")
    dom = browser.dom(file_url(os.path.join(site, "kernels.html")))
    if not re.search(r"<tr><td>windowed</td><td>float32</td><td>OK [0-9]", dom):
        yield ("kernels.html: no measured row of the windowed kernel in float32")


def mutate(site, out, kind):
    """A copy of the site with one thing broken."""
    copy = os.path.join(out, f"mutant-{kind}")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(site, copy)
    if kind == "filter":  # the filter hides nothing
        path = os.path.join(copy, "site.js")
        text = open(path).read()
        assert "row.hidden = !k;" in text
        open(path, "w").write(text.replace("row.hidden = !k;", "row.hidden = false;"))
    elif kind == "missing-page":
        pages = sorted(os.listdir(os.path.join(copy, "cases")))
        os.remove(os.path.join(copy, "cases", pages[0]))
    return copy


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    kvconform = os.path.abspath(sys.argv[1])
    out = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build", "site-test"))
    browser_path = chromium()
    if browser_path is None:
        print("site_browser: SKIP: chromium is not installed (KVC_WITH_BROWSER=1 scripts/setup.sh installs it)")
        return SKIP
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    reports, known = make_reports(kvconform, out)
    cases = cases_of(reports)
    site = os.path.join(out, "site")
    done = run([kvconform, "site", *reports, "--known", known, "--out", site], ok=(0,))
    print(done.stdout.strip())
    failures = []
    # Same reports, same bytes.
    again = os.path.join(out, "site-again")
    run([kvconform, "site", *reports, "--known", known, "--out", again], ok=(0,))
    if subprocess.run(["diff", "-r", site, again], capture_output=True).returncode != 0:
        failures.append("two sites from the same reports differ")
    # A folder that is not a report: exit 2 naming it, and no site written.
    bad = run([kvconform, "site", out, "--out", os.path.join(out, "bad-site")], ok=(2,))
    if "no summary.json" not in bad.stderr or os.path.exists(os.path.join(out, "bad-site")):
        failures.append(f"a folder without summary.json: {bad.stderr.strip()!r}")

    with tempfile.TemporaryDirectory() as profile:
        browser = Browser(browser_path, profile)
        failures += list(check(site, cases, browser))
        for kind in ("filter", "missing-page"):
            if next(check(mutate(site, out, kind), cases, browser), None) is None:
                failures.append(f"mutant {kind}: every check passed on a broken site")
            else:
                print(f"site_browser: mutant {kind} caught")
        shots = [("matrix.png", file_url(os.path.join(site, "matrix.html"), "status=FAIL,DEVIATION")),
                 ("findings.png", file_url(os.path.join(site, "findings.html"))),
                 ("index.png", file_url(os.path.join(site, "index.html")))]
        pages = sorted(os.listdir(os.path.join(site, "cases")))
        shots += [("case.png", file_url(os.path.join(site, "cases", p))) for p in pages if p.startswith("property")][:1]
        for name, url in shots:
            if not browser.screenshot(url, os.path.join(out, name)):
                failures.append(f"screenshot {name} of {url}: not written or blank")
    for f in failures:
        print(f"site_browser: FAIL: {f}")
    if failures:
        return 1
    print(f"site_browser: OK ({len(cases)} cases; screenshots in {out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
