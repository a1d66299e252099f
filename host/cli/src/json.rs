//! The `--json` envelope: every document kpack prints carries
//! `schema_version`, added here and nowhere else.

/// The schema version of every `--json` document.
pub const SCHEMA_VERSION: u32 = 1;

/// `doc` (a JSON object) with `schema_version` added. Objects print with
/// sorted keys, so where it is added does not change the output.
pub fn envelope(mut doc: serde_json::Value) -> serde_json::Value {
    if let Some(o) = doc.as_object_mut() {
        o.insert("schema_version".into(), SCHEMA_VERSION.into());
    }
    doc
}

/// `doc` serialized, in the envelope.
pub fn document<T: serde::Serialize + ?Sized>(doc: &T) -> anyhow::Result<serde_json::Value> {
    Ok(envelope(serde_json::to_value(doc)?))
}

/// Print `doc` in the envelope, pretty, on stdout.
pub fn print<T: serde::Serialize + ?Sized>(doc: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(&document(doc)?)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_the_version_to_objects_only() {
        let v = envelope(serde_json::json!({"b": 1, "a": 2}));
        assert_eq!(v.to_string(), r#"{"a":2,"b":1,"schema_version":1}"#);
        assert_eq!(envelope(serde_json::json!([1])), serde_json::json!([1]));
    }
}
