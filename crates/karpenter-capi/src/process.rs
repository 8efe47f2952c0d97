//! Small process and client helpers shared by the commands.
//!
//! Responsibility: this process's resource use for the benchmarks: [`cpu_seconds`]
//! (user + system, from `/proc/self/stat`) and [`peak_rss_mib`] (`VmHWM` from
//! `/proc/self/status`), and [`reset_peak_rss`] so one process can measure several runs in turn.
//! Linux only; elsewhere the figures are absent.
//! Inputs: `/proc`. Outputs: numbers.

/// CPU seconds (user + system) this process used so far; 0 when unknown.
#[must_use]
pub fn cpu_seconds() -> f64 {
    // Fields 14 and 15 of /proc/self/stat: utime and stime in clock ticks (100 per second).
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = s.rsplit_once(')')?.1;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let utime: f64 = fields.get(11)?.parse().ok()?;
            let stime: f64 = fields.get(12)?.parse().ok()?;
            Some((utime + stime) / 100.0)
        })
        .unwrap_or(0.0)
}

/// The peak resident set of this process, in MiB.
#[must_use]
pub fn peak_rss_mib() -> Option<f64> {
    peak_rss_mib_of("self")
}

/// Peak resident set (`VmHWM`) of process `pid` (`"self"` or a number), MiB.
#[must_use]
pub fn peak_rss_mib_of(pid: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Resets this process's peak resident set to its current resident set (Linux 4.0+: writing
/// `5` to `/proc/self/clear_refs`), so the next [`peak_rss_mib`] covers only what follows.
/// Whether the reset took effect.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_peak_rss_and_cpu_time() {
        if cfg!(target_os = "linux") {
            assert!(peak_rss_mib().is_some_and(|m| m > 0.0));
            assert!(cpu_seconds() >= 0.0);
        }
    }

    #[test]
    fn a_reset_peak_forgets_an_earlier_high_water_mark() {
        if !cfg!(target_os = "linux") {
            return;
        }
        let big = vec![1u8; 256 << 20];
        std::hint::black_box(&big);
        let high = peak_rss_mib().unwrap();
        drop(big);
        assert!(reset_peak_rss());
        let after = peak_rss_mib().unwrap();
        assert!(
            after + 128.0 < high,
            "peak {high} MiB, after the reset {after} MiB"
        );
    }
}
