//! Finds where each top-level object of a JSON array file starts, and on which lines some of its keys sit.
//!
//! serde_json reports positions only for errors, so the loader runs this cheap byte scanner over the
//! same text to give every event and metric a file line. It assumes the text is valid JSON (serde has
//! already accepted it) and never fails: on odd input it just finds fewer objects, which the caller checks.

/// Keys whose line numbers are recorded, in this order in [`ObjectPos::key_lines`].
pub(crate) const TRACKED_KEYS: [&str; 4] =
    ["EventName", "MetricName", "MetricExpr", "MetricThreshold"];

/// Position of one top-level object.
#[derive(Debug, Clone, Default)]
pub(crate) struct ObjectPos {
    /// 1-based line of the object's `{`.
    pub line: usize,
    /// Byte offset of the object's `{`.
    pub start: usize,
    /// 1-based line of each [`TRACKED_KEYS`] key inside the object, 0 when absent.
    pub key_lines: [usize; TRACKED_KEYS.len()],
}

/// Scans `text` (a JSON array of objects) and returns the position of each top-level object, in order.
pub(crate) fn object_positions(text: &[u8]) -> Vec<ObjectPos> {
    let mut objects = Vec::new();
    let mut depth = 0usize;
    let mut line = 1usize;
    // The last string closed at depth 2 (inside a top-level object): a key if a `:` follows.
    let mut last_string: Option<(usize, usize, usize)> = None;
    let mut pos = 0usize;
    while pos < text.len() {
        let byte = text[pos];
        match byte {
            b'\n' => line += 1,
            b'"' => {
                let start = pos + 1;
                let string_line = line;
                pos += 1;
                while pos < text.len() {
                    match text[pos] {
                        b'"' => break,
                        b'\\' => pos += 1,
                        b'\n' => line += 1,
                        _ => {}
                    }
                    pos += 1;
                }
                last_string = (depth == 2).then_some((start, pos.min(text.len()), string_line));
            }
            b':' if depth == 2 => {
                if let (Some((start, end, key_line)), Some(object)) =
                    (last_string, objects.last_mut())
                {
                    let key = &text[start..end];
                    let tracked = TRACKED_KEYS.iter().position(|k| k.as_bytes() == key);
                    if let Some(slot) = tracked {
                        let object: &mut ObjectPos = object;
                        if object.key_lines[slot] == 0 {
                            object.key_lines[slot] = key_line;
                        }
                    }
                }
                last_string = None;
            }
            b'{' | b'[' => {
                if byte == b'{' && depth == 1 {
                    objects.push(ObjectPos { line, start: pos, ..ObjectPos::default() });
                }
                depth += 1;
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        pos += 1;
    }
    objects
}

/// The 1-based line of the first `"key":` directly inside the object whose `{` is at byte `start`
/// and sits on line `line`. Only called for findings, so it rescans rather than storing every key.
pub(crate) fn key_line(text: &[u8], start: usize, line: usize, key: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut line = line;
    let mut last_string: Option<(usize, usize, usize)> = None;
    let mut pos = start;
    while pos < text.len() {
        match text[pos] {
            b'\n' => line += 1,
            b'"' => {
                let begin = pos + 1;
                let string_line = line;
                pos += 1;
                while pos < text.len() {
                    match text[pos] {
                        b'"' => break,
                        b'\\' => pos += 1,
                        b'\n' => line += 1,
                        _ => {}
                    }
                    pos += 1;
                }
                last_string = (depth == 1).then_some((begin, pos.min(text.len()), string_line));
            }
            b':' if depth == 1 => {
                if let Some((begin, end, key_line)) = last_string.take()
                    && &text[begin..end] == key.as_bytes()
                {
                    return Some(key_line);
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return None;
                }
            }
            _ => {}
        }
        pos += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_objects_and_key_lines() {
        let text = br#"[
  {
    "EventName": "A",
    "BriefDescription": "has \"MetricExpr\": inside { and ["
  },
  { "MetricName": "m", "X": {"MetricExpr": "nested"},
    "MetricExpr": "a / b"
  }
]"#;
        let objects = object_positions(text);
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[0].line, 2);
        assert_eq!(objects[0].key_lines, [3, 0, 0, 0]);
        assert_eq!(objects[1].line, 6);
        assert_eq!(objects[1].key_lines, [0, 6, 7, 0]);
        let second = &objects[1];
        assert_eq!(key_line(text, second.start, second.line, "MetricExpr"), Some(7));
        assert_eq!(key_line(text, second.start, second.line, "X"), Some(6));
        assert_eq!(key_line(text, second.start, second.line, "EventName"), None);
        assert_eq!(key_line(text, objects[0].start, objects[0].line, "BriefDescription"), Some(4));
    }
}
