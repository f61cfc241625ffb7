//! A configuration as JSON patched: a value set at a dotted key, one object merged into another.

/// Sets `value` at the dotted `key` of `config` (`policy.crop_shape`), making the objects on
/// the way.
pub fn set_key(config: &mut serde_json::Value, key: &str, value: serde_json::Value) {
    let mut at = config;
    for part in key.split('.') {
        if !at.is_object() {
            *at = serde_json::json!({});
        }
        at = at.as_object_mut().expect("an object").entry(part).or_insert(serde_json::Value::Null);
    }
    *at = value;
}

/// Merges `patch` into `base`: objects key by key, everything else replaced.
pub fn merge(base: &mut serde_json::Value, patch: serde_json::Value) {
    match (base, patch) {
        (serde_json::Value::Object(b), serde_json::Value::Object(p)) => {
            for (k, v) in p {
                merge(b.entry(k).or_insert(serde_json::Value::Null), v);
            }
        }
        (b, p) => *b = p,
    }
}
