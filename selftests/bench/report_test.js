// make bench's report (scripts/bench-report.py, scripts/bench-compare.sh):
// summary rows and curve points as a bench run leaves them become
// results.json with every figure parsed, and a page that Debian's headless
// Chromium renders with each table row and each plot drawn from its data;
// bad rows are refused by file and line; two runs compare beyond the noise.
'use strict';

const assert = require('node:assert');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const puppeteer = require(path.join(__dirname, '..', 'dashboard', 'node_modules', 'puppeteer-core'));

const ROOT = path.join(__dirname, '..', '..');
const REPORT = path.join(ROOT, 'scripts', 'bench-report.py');
const COMPARE = path.join(ROOT, 'scripts', 'bench-compare.sh');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = process.env.ARTIFACTS || os.tmpdir();

function run(argv) {
  const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8' });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

// Rows as bench/bench_util.h's append_summary writes them.
function summary(rows) {
  return rows.map((r) => r.join('\t')).join('\n') + '\n';
}

function series() {
  const lines = [];
  for (const [name, base] of [['faultline (JSON)', 2], ['nft -f (one set)', 3]]) {
    for (const n of [10, 1000, 10000, 100000]) {
      lines.push(JSON.stringify({ plot: 'time to load N denied addresses', x_label: 'addresses', y_label: 'ms',
        series: name, x: n, y: base + n / 1000 }));
    }
  }
  return lines.join('\n') + '\n';
}

function build(dir, tsv, jsonl, name) {
  fs.writeFileSync(path.join(dir, name + '.tsv'), tsv);
  fs.writeFileSync(path.join(dir, name + '.jsonl'), jsonl);
  return run(['/usr/bin/python3', REPORT, 'build', '--summary', path.join(dir, name + '.tsv'), '--series',
    path.join(dir, name + '.jsonl'), '--json', path.join(dir, name + '.json'), '--html', path.join(dir, name + '.html')]);
}

async function main() {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fl-bench-report-'));
  let browser = null;
  try {
    const rows = [
      ['3 apply', 'through faultd, warm run to effect', '6.9 ms [3.9-16.7]', '0.15x [0.08-0.30]', '<= 5 ms', 'MISSED'],
      ['11 exec gate', 'exec under --block-dangerous', '880 us [860-900]', '1.11x [1.07-1.18]', '<= 1.15x', 'MET'],
      ['6 tls mint', 'leaf minted', '2.1 ms', '-', '-', 'report'],
    ];
    const built = build(dir, summary(rows), series(), 'a');
    assert.strictEqual(built.code, 0, 'build failed: ' + built.err);
    assert.match(built.out, /3 figures, 1 plots/);

    const results = JSON.parse(fs.readFileSync(path.join(dir, 'a.json'), 'utf8'));
    assert.strictEqual(results.rows.length, 3);
    assert.deepStrictEqual(results.rows[0].ratio, { text: '0.15x [0.08-0.30]', median: 0.15, unit: 'x', min: 0.08, max: 0.3 });
    assert.deepStrictEqual(results.rows[0].absolute, { text: '6.9 ms [3.9-16.7]', median: 6.9, unit: 'ms', min: 3.9, max: 16.7 });
    assert.deepStrictEqual(results.rows[2].absolute, { text: '2.1 ms', median: 2.1, unit: 'ms' });
    assert.deepStrictEqual(results.rows[2].ratio, { text: '-' });
    assert.strictEqual(results.points.length, 8);
    assert.ok(results.machine.kernel && results.machine.cpus > 0, JSON.stringify(results.machine));

    browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true,
      userDataDir: path.join(dir, 'profile'), args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'] });
    const page = await browser.newPage();
    await page.goto('file://' + path.join(dir, 'a.html'), { waitUntil: 'load' });
    const seen = await page.evaluate(() => ({
      title: document.title,
      rows: [...document.querySelectorAll('#figures tr.row')].map((tr) => [...tr.cells].map((c) => c.textContent)),
      missed: [...document.querySelectorAll('td.MISSED')].length,
      met: [...document.querySelectorAll('td.MET')].length,
      plots: [...document.querySelectorAll('figure.plot')].map((f) => ({
        points: Number(f.dataset.points),
        series: Number(f.dataset.series),
        // matplotlib draws each series' line as a path with data; the page is
        // laid out, so the drawing has a size.
        lines: [...f.querySelectorAll('svg path')].filter((p) => (p.getAttribute('d') || '').length > 20).length,
        width: f.querySelector('svg').getBoundingClientRect().width,
        caption: f.querySelector('figcaption').textContent,
      })),
    }));
    await page.screenshot({ path: path.join(ARTIFACTS, 'bench-report.png'), fullPage: true });
    assert.strictEqual(seen.title, 'Faultline bench report');
    assert.strictEqual(seen.rows.length, 3, JSON.stringify(seen.rows));
    assert.deepStrictEqual(seen.rows[0], rows[0]);
    assert.strictEqual(seen.missed, 1);
    assert.strictEqual(seen.met, 1);
    assert.strictEqual(seen.plots.length, 1, JSON.stringify(seen.plots));
    assert.strictEqual(seen.plots[0].points, 8);
    assert.strictEqual(seen.plots[0].series, 2);
    assert.ok(seen.plots[0].lines >= 2, 'the plot has no lines: ' + JSON.stringify(seen.plots[0]));
    assert.ok(seen.plots[0].width > 100, 'the plot is not laid out: ' + JSON.stringify(seen.plots[0]));
    assert.strictEqual(seen.plots[0].caption, 'time to load N denied addresses: 8 points in 2 series');

    // Bad input: refused by file and line, nothing written.
    const bad = build(dir, summary(rows) + '3 apply\tonly\tthree\n', series(), 'bad');
    assert.strictEqual(bad.code, 2, bad.out + bad.err);
    assert.match(bad.err, /bad\.tsv:4: expected 6 tab-separated columns \(bench, case, absolute, ratio, target, result\), found 3/);
    assert.ok(!fs.existsSync(path.join(dir, 'bad.json')), 'a refused build wrote results.json');
    const badPoint = build(dir, summary(rows), series() + '{"plot":"p","x_label":"x","y_label":"y","series":"s","x":"ten","y":1}\n', 'badpoint');
    assert.strictEqual(badPoint.code, 2, badPoint.out + badPoint.err);
    assert.match(badPoint.err, /badpoint\.jsonl:9: x: expected a number/);

    // Two runs: the apply ratio moved beyond its range, the exec gate's did not.
    const moved = rows.map((r) => [...r]);
    moved[0][3] = '0.55x [0.50-0.60]';
    moved[1][3] = '1.13x [1.09-1.20]';
    assert.strictEqual(build(dir, summary(moved), series(), 'b').code, 0);
    const cmp = run([COMPARE, path.join(dir, 'a.json'), path.join(dir, 'b.json')]);
    assert.strictEqual(cmp.code, 0, cmp.err);
    assert.match(cmp.out, /moved up: 3 apply: through faultd, warm run to effect \(ratio\): 0\.15x \[0\.08-0\.30\] -> 0\.55x \[0\.50-0\.60\]/);
    assert.doesNotMatch(cmp.out, /exec under --block-dangerous/);
    assert.match(cmp.out, /1 moved beyond the noise, 1 within it, 1 without a spread/);
    const cmpBad = run([COMPARE, path.join(dir, 'a.json'), path.join(dir, 'a.tsv')]);
    assert.strictEqual(cmpBad.code, 2, cmpBad.out);
    assert.match(cmpBad.err, /a\.tsv: /);
    console.log('bench report: results.json parsed, page rendered with 3 rows and 1 plot of 8 points, bad input refused, compare found 1 move');
  } finally {
    if (browser) await browser.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
