//! The printed report: markdown sections and tables on stdout, and the
//! verdict against a target (a figure, never an assertion).

use std::fmt::Write as _;

/// A markdown table built row by row.
#[derive(Debug, Clone)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are left empty, extra cells are kept.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let line = |cells: &[String]| format!("| {} |", cells.join(" | "));
        let _ = writeln!(out, "{}", line(&self.headers));
        let rule: Vec<String> = self.headers.iter().map(|_| "---".to_string()).collect();
        let _ = writeln!(out, "{}", line(&rule));
        for row in &self.rows {
            let mut cells = row.clone();
            cells.resize(self.headers.len().max(row.len()), String::new());
            let _ = writeln!(out, "{}", line(&cells));
        }
        out
    }
}

/// `met` or `missed`, for a figure printed next to its target.
pub fn verdict(met: bool) -> String {
    if met { "met" } else { "**missed**" }.to_string()
}

/// Prints a section heading and the command line that produced it.
pub fn section(title: &str, command_line: &str) {
    println!("\n## {title}\n");
    println!("Command: `{command_line}`\n");
}

/// Prints a table followed by a blank line.
pub fn print_table(table: &Table) {
    println!("{}", table.render());
}

/// Prints a free-text note under a table.
pub fn note(text: &str) {
    println!("{text}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_renders_as_markdown_with_padded_rows() {
        let mut t = Table::new(&["metric", "value", "target"]);
        t.row(vec!["p50".into(), "12 µs".into()]);
        assert_eq!(
            t.render(),
            "| metric | value | target |\n| --- | --- | --- |\n| p50 | 12 µs |  |\n"
        );
    }

    #[test]
    fn verdicts_name_misses_loudly() {
        assert_eq!(verdict(true), "met");
        assert_eq!(verdict(false), "**missed**");
    }
}
