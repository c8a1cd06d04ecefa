//! Summaries of measured samples: min, median, p99, max (nearest-rank
//! quantiles, so every reported figure is a value that was really measured).

use std::time::Duration;

/// The spread of a set of duration samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub count: usize,
    pub min: Duration,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
    /// The arithmetic mean (not itself a measured value).
    pub mean: Duration,
}

impl Summary {
    /// Summarises `samples`; `None` when there are none.
    pub fn of(samples: &[Duration]) -> Option<Summary> {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let (first, last) = (sorted.first()?, sorted.last()?);
        let total: Duration = sorted.iter().sum();
        Some(Summary {
            count: sorted.len(),
            min: *first,
            p50: nearest_rank(&sorted, 0.50),
            p99: nearest_rank(&sorted, 0.99),
            max: *last,
            mean: total / sorted.len() as u32,
        })
    }
}

/// The nearest-rank quantile `q` (0 < q ≤ 1) of sorted, non-empty samples.
fn nearest_rank(sorted: &[Duration], q: f64) -> Duration {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A duration in the unit that keeps three significant digits readable.
pub fn fmt_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos < 1_000 {
        format!("{nanos} ns")
    } else if nanos < 1_000_000 {
        format!("{:.1} µs", nanos as f64 / 1e3)
    } else if nanos < 1_000_000_000 {
        format!("{:.2} ms", nanos as f64 / 1e6)
    } else {
        format!("{:.2} s", nanos as f64 / 1e9)
    }
}

/// Kibibytes as MiB with two decimals.
pub fn fmt_kib(kib: u64) -> String {
    format!("{:.2} MiB", kib as f64 / 1024.0)
}

/// An integer with thin thousands separators (`1 000 000`).
pub fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn nearest_rank_quantiles_are_measured_values() {
        let samples: Vec<Duration> = (1..=100).rev().map(ms).collect();
        let s = Summary::of(&samples).unwrap();
        assert_eq!(s.count, 100);
        assert_eq!(s.min, ms(1));
        assert_eq!(s.p50, ms(50));
        assert_eq!(s.p99, ms(99));
        assert_eq!(s.max, ms(100));
        assert_eq!(s.mean, Duration::from_micros(50_500));
    }

    #[test]
    fn a_single_sample_is_every_quantile() {
        let s = Summary::of(&[ms(7)]).unwrap();
        assert_eq!((s.min, s.p50, s.p99, s.max), (ms(7), ms(7), ms(7), ms(7)));
    }

    #[test]
    fn no_samples_no_summary() {
        assert_eq!(Summary::of(&[]), None);
    }

    #[test]
    fn durations_pick_a_readable_unit() {
        assert_eq!(fmt_duration(Duration::from_nanos(850)), "850 ns");
        assert_eq!(fmt_duration(Duration::from_nanos(12_345)), "12.3 µs");
        assert_eq!(fmt_duration(Duration::from_micros(4_560)), "4.56 ms");
        assert_eq!(fmt_duration(Duration::from_millis(1_234)), "1.23 s");
    }

    #[test]
    fn counts_get_thousands_separators() {
        assert_eq!(fmt_count(7), "7");
        assert_eq!(fmt_count(1_000), "1 000");
        assert_eq!(fmt_count(1_000_000), "1 000 000");
        assert_eq!(fmt_count(123_456), "123 456");
    }
}
