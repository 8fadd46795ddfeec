//! `gemm report`: the README's benchmark tables, generated from the committed JSON records of
//! `gemm bench`, so that a table never says what its record does not.
//!
//! `gemm report RECORD.json` prints a record's table and summary. `gemm report --readme
//! README.md` regenerates every block of the document that starts with the line
//! `<!-- gemm report RECORD.json -->` and ends with `<!-- end gemm report -->` (`RECORD.json`
//! relative to the document's folder); with `--check` it changes nothing and fails when a
//! block differs from what its record gives (CI runs this).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;

use crate::bench::{Record, Row, ops_label, shape_label};

#[derive(Args)]
pub struct ReportArgs {
    /// A JSON record of `gemm bench` whose table to print.
    record: Option<PathBuf>,
    /// Regenerate the marked blocks of this Markdown document instead.
    #[arg(long, conflicts_with = "record")]
    readme: Option<PathBuf>,
    /// With --readme: change nothing, fail when a block is stale.
    #[arg(long, requires = "readme")]
    check: bool,
}

const BEGIN: &str = "<!-- gemm report ";
const END: &str = "<!-- end gemm report -->";

pub fn report(args: &ReportArgs) -> Result<bool, String> {
    match (&args.record, &args.readme) {
        (Some(record), None) => {
            print!("{}", table(&load(record)?));
            Ok(true)
        }
        (None, Some(readme)) => regenerate(readme, args.check),
        _ => Err("give a record, or --readme DOCUMENT".into()),
    }
}

fn load(path: &Path) -> Result<Record, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Rewrites (or with `check`, compares) every marked block of the document at `path`.
fn regenerate(path: &Path, check: bool) -> Result<bool, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let folder = path.parent().unwrap_or(Path::new("."));
    let mut out = String::with_capacity(text.len());
    let mut lines = text.split_inclusive('\n');
    let mut blocks = 0;
    while let Some(line) = lines.next() {
        out.push_str(line);
        let Some(record) = line.trim_end().strip_prefix(BEGIN).and_then(|r| r.strip_suffix(" -->")) else {
            continue;
        };
        // Skip the old block up to its end marker, then write the new one before it.
        let end =
            lines.by_ref().find(|l| l.trim_end() == END).ok_or_else(|| format!("{record}: no `{END}`"))?;
        out.push_str(&table(&load(&folder.join(record))?));
        out.push_str(end);
        blocks += 1;
    }
    if blocks == 0 {
        return Err(format!("{}: no `{BEGIN}RECORD -->` block", path.display()));
    }
    if out == text {
        println!("{}: {blocks} table(s) up to date", path.display());
        return Ok(true);
    }
    if check {
        println!(
            "{}: a table differs from its record: run `gemm report --readme {}`",
            path.display(),
            path.display()
        );
        return Ok(false);
    }
    std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()))?;
    println!("{}: {blocks} table(s) regenerated", path.display());
    Ok(true)
}

/// The kernels of a record in the order they were asked for.
fn kernels(record: &Record) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for row in &record.rows {
        if !names.contains(&row.kernel.as_str()) {
            names.push(&row.kernel);
        }
    }
    names
}

fn geomean(values: &[f64]) -> f64 {
    (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp()
}

/// `first` (as asked for) and what it resolved to, e.g. `auto = warpgroup`.
fn resolved(rows: &[&Row]) -> String {
    match rows.first() {
        Some(row) if row.kernel != row.resolved => format!("{} = {}", row.kernel, row.resolved),
        Some(row) => row.kernel.clone(),
        None => String::new(),
    }
}

/// The Markdown table of a record and the summary lines under it.
fn table(record: &Record) -> String {
    if record.backend == "gpu" { gpu_table(record) } else { cpu_table(record) }
}

/// One row per size: the first kernel's rate, the peer's, and every kernel's ratio to it.
fn gpu_table(record: &Record) -> String {
    let kernels = kernels(record);
    let rows_of = |k: &str| record.rows.iter().filter(|r| r.kernel == k).collect::<Vec<_>>();
    let first = rows_of(kernels[0]);
    let peer = first.iter().find_map(|r| r.peer.clone()).unwrap_or_else(|| "peer".into());
    let mut s = String::new();
    let _ = write!(s, "| n | {} TFLOP/s | {peer} TFLOP/s |", resolved(&first));
    for k in &kernels {
        let _ = write!(s, " {k} / {peer} |");
    }
    s.push_str("\n|---:|---:|---:|");
    s.push_str(&"---:|".repeat(kernels.len()));
    s.push('\n');
    for row in &first {
        let peer_rate = row.peer_tflops.map_or("-".into(), |p| format!("{p:.1}"));
        let _ = write!(s, "| {} | {:.1} | {peer_rate} |", size(row), row.tflops);
        for k in &kernels {
            let same =
                record.rows.iter().find(|r| r.kernel == *k && (r.m, r.n, r.k) == (row.m, row.n, row.k));
            let _ = write!(s, " {} |", same.and_then(|r| r.ratio).map_or("-".into(), |x| format!("{x:.3}")));
        }
        s.push('\n');
    }
    s.push('\n');
    let summaries: Vec<String> = kernels
        .iter()
        .filter_map(|k| {
            let rows = rows_of(k);
            let ratios: Vec<(f64, &Row)> = rows.iter().filter_map(|r| r.ratio.map(|x| (x, *r))).collect();
            let (min, at) = ratios.iter().min_by(|x, y| x.0.total_cmp(&y.0))?;
            let values: Vec<f64> = ratios.iter().map(|x| x.0).collect();
            Some(format!("`{k}` {:.3} (minimum {min:.3} at n = {})", geomean(&values), size(at)))
        })
        .collect();
    let _ = writeln!(s, "Geometric mean over {peer}, {} sizes: {}.", first.len(), summaries.join(", "));
    let errors = |pick: &dyn Fn(&Row) -> Option<f64>| {
        let e: Vec<f64> = first.iter().filter_map(|r| pick(r)).collect();
        let (lo, hi) = e.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        format!("{lo:.1e} to {hi:.1e}")
    };
    let peer_error =
        |r: &Row| r.peers.iter().find(|p| Some(&p.name) == r.peer.as_ref()).map(|p| p.max_rel_err);
    let _ = writeln!(
        s,
        "Max normalized error {} for `{}` ({peer} {}).",
        errors(&|r| Some(r.max_rel_err)),
        kernels[0],
        errors(&peer_error)
    );
    s
}

/// One row per size and thread count: our first kernel and every peer in GFLOP/s, the ratio
/// to the best peer, and on single-threaded rows the FMA peak timed beside them.
fn cpu_table(record: &Record) -> String {
    let kernels = kernels(record);
    let rows_of = |k: &str| record.rows.iter().filter(|r| r.kernel == k).collect::<Vec<_>>();
    let first = rows_of(kernels[0]);
    let peers: Vec<String> =
        first.first().map(|r| r.peers.iter().map(|p| p.name.clone()).collect()).unwrap_or_default();
    let gflops = |t: f64| format!("{:.1}", t * 1e3);
    let mut s = String::new();
    let _ = write!(s, "| n | threads | ours ({}) |", resolved(&first));
    for p in &peers {
        let _ = write!(s, " {p} |");
    }
    s.push_str(" ratio to the best | FMA peak | of peak |\n|---:|---:|---:|");
    s.push_str(&"---:|".repeat(peers.len() + 3));
    s.push('\n');
    for row in &first {
        let _ = write!(s, "| {} | {} | {} |", size(row), row.threads, gflops(row.tflops));
        for p in &peers {
            let rate = row.peers.iter().find(|t| &t.name == p).map_or("-".into(), |t| gflops(t.tflops));
            let _ = write!(s, " {rate} |");
        }
        let _ = writeln!(
            s,
            " {} | {} | {} |",
            row.ratio.map_or("-".into(), |x| format!("{x:.3}")),
            row.fma_peak_tflops.map_or("-".into(), gflops),
            row.peak_fraction.map_or("-".into(), |f| format!("{:.1}%", f * 100.0)),
        );
    }
    s.push('\n');
    for k in &kernels {
        let ratios: Vec<f64> = rows_of(k).iter().filter_map(|r| r.ratio).collect();
        if ratios.is_empty() {
            continue;
        }
        let (lo, hi) = ratios.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        let first_in = ratios.iter().filter(|&&x| x >= 1.0).count();
        let _ = writeln!(
            s,
            "`{}`: geometric mean of the ratio to the best peer over {} rows {:.3} ({lo:.3} to {hi:.3}); \
             first in {first_in} of {}.",
            resolved(&rows_of(k)),
            ratios.len(),
            geomean(&ratios),
            ratios.len()
        );
    }
    s
}

/// The row's shape as tables write it, with the operands' storage when transposed.
fn size(row: &Row) -> String {
    shape_label(row.m, row.n, row.k) + &ops_label(row.trans_a, row.trans_b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_block_fails_the_check_and_is_regenerated() {
        let dir = std::env::temp_dir().join(format!("gemm-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let record = r#"{"device": "d", "backend": "gpu", "date": "", "commit": "", "driver": null,
            "sm_clock_mhz": null, "command": "", "rows": [{"backend": "gpu", "kernel": "auto",
            "resolved": "warpgroup", "m": 64, "n": 64, "k": 64, "threads": 1, "seconds": 1.0,
            "median_seconds": 1.0, "spread": 0.0, "replays": 1, "tflops": 2.0, "peer": "cublas",
            "peer_tflops": 1.0, "ratio": 2.0, "fma_peak_tflops": null, "peak_fraction": null,
            "max_rel_err": 1e-7, "passed": true, "peers": [{"name": "cublas", "seconds": 2.0,
            "median_seconds": 2.0, "spread": 0.0, "replays": 1, "tflops": 1.0, "max_rel_err": 2e-7}]}]}"#;
        std::fs::write(dir.join("r.json"), record).unwrap();
        let doc = dir.join("doc.md");
        std::fs::write(
            &doc,
            "intro\n<!-- gemm report r.json -->\n| old |\n<!-- end gemm report -->\nafter\n",
        )
        .unwrap();
        assert_eq!(regenerate(&doc, true), Ok(false));
        assert_eq!(regenerate(&doc, false), Ok(true));
        assert_eq!(regenerate(&doc, true), Ok(true));
        let text = std::fs::read_to_string(&doc).unwrap();
        assert!(
            text.starts_with("intro\n<!-- gemm report r.json -->\n| n | auto = warpgroup TFLOP/s"),
            "{text}"
        );
        assert!(text.contains("| 64 | 2.0 | 1.0 | 2.000 |\n"), "{text}");
        assert!(text.ends_with("<!-- end gemm report -->\nafter\n"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
