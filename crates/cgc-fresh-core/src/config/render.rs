//! Showing the effective configuration: as JSON for tools, as a table for
//! people. Both say, for every key, which layer set its value.

use serde_json::{Map, Value};

use super::keys::Key;
use super::layered::LayeredConfig;

impl LayeredConfig {
    /// `{"freshness.watch": {"value": "auto", "layer": "workspace (PATH)"}, ...}`
    /// with every key. The `value`s, taken together, form a valid
    /// configuration file with dotted keys.
    pub fn render_json(&self) -> Value {
        let entries: Map<String, Value> = Key::ALL
            .into_iter()
            .map(|key| {
                let mut entry = Map::new();
                entry.insert("value".to_owned(), self.settings().value_of(key));
                entry.insert(
                    "layer".to_owned(),
                    Value::from(self.origin(key).describe_for(key)),
                );
                (key.name().to_owned(), Value::Object(entry))
            })
            .collect();
        Value::Object(entries)
    }

    /// A plain-text table, one key per line: key, value, the layer that set
    /// it. Ends with a newline.
    pub fn render_table(&self) -> String {
        let header = ["KEY".to_owned(), "VALUE".to_owned(), "SET BY".to_owned()];
        let rows: Vec<[String; 3]> = Key::ALL
            .into_iter()
            .map(|key| {
                let value = match self.settings().value_of(key) {
                    Value::String(text) => text,
                    other => other.to_string(),
                };
                [
                    key.name().to_owned(),
                    value,
                    self.origin(key).describe_for(key),
                ]
            })
            .collect();
        let width = |column: usize| {
            std::iter::once(&header)
                .chain(&rows)
                .map(|row| row[column].chars().count())
                .max()
                .unwrap_or(0)
        };
        let (key_width, value_width) = (width(0), width(1));
        std::iter::once(&header)
            .chain(&rows)
            .map(|[key, value, layer]| {
                format!("{key:<key_width$}  {value:<value_width$}  {layer}\n")
            })
            .collect()
    }
}
