//! The JSON objects of one file as read, before `ArchStdEvent` expansion: known keys only.
//!
//! Unknown keys, including the typos jevents.py also ignores (`BriefDescript6ion`,
//! `PublicDescrition`), are skipped but remembered so the loader can report them. A JSON number is
//! read as its decimal text; other non-string values are kept aside (as their type's name) so the
//! finding can name the object rather than a byte offset.

use serde::Deserialize;
use serde_json::Value;

/// Every key the loader reads. The order is the order of [`RawObject::values`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Key {
    EventName,
    EventCode,
    ExtSel,
    ConfigCode,
    EventidCode,
    LegacyConfigCode,
    LegacyCacheCode,
    UMask,
    CounterMask,
    EdgeDetect,
    Invert,
    AnyThread,
    PortMask,
    FcMask,
    SampleAfterValue,
    NodeType,
    RdWrMask,
    EnAllCores,
    EnAllSlices,
    SliceId,
    ThreadMask,
    Filter,
    MsrIndex,
    MsrValue,
    Unit,
    Counter,
    Pebs,
    PerPkg,
    Deprecated,
    Experimental,
    ScaleUnit,
    BriefDescription,
    PublicDescription,
    DataLa,
    Errata,
    Compat,
    ArchStdEvent,
    MetricName,
    MetricExpr,
    MetricThreshold,
    MetricGroup,
    MetricgroupNoGroup,
    DefaultMetricgroupName,
    MetricConstraint,
    AggregationMode,
}

pub(crate) const KEY_COUNT: usize = Key::AggregationMode as usize + 1;

impl Key {
    pub(crate) fn json_name(self) -> &'static str {
        match self {
            Key::EventName => "EventName",
            Key::EventCode => "EventCode",
            Key::ExtSel => "ExtSel",
            Key::ConfigCode => "ConfigCode",
            Key::EventidCode => "EventidCode",
            Key::LegacyConfigCode => "LegacyConfigCode",
            Key::LegacyCacheCode => "LegacyCacheCode",
            Key::UMask => "UMask",
            Key::CounterMask => "CounterMask",
            Key::EdgeDetect => "EdgeDetect",
            Key::Invert => "Invert",
            Key::AnyThread => "AnyThread",
            Key::PortMask => "PortMask",
            Key::FcMask => "FCMask",
            Key::SampleAfterValue => "SampleAfterValue",
            Key::NodeType => "NodeType",
            Key::RdWrMask => "RdWrMask",
            Key::EnAllCores => "EnAllCores",
            Key::EnAllSlices => "EnAllSlices",
            Key::SliceId => "SliceId",
            Key::ThreadMask => "ThreadMask",
            Key::Filter => "Filter",
            Key::MsrIndex => "MSRIndex",
            Key::MsrValue => "MSRValue",
            Key::Unit => "Unit",
            Key::Counter => "Counter",
            Key::Pebs => "PEBS",
            Key::PerPkg => "PerPkg",
            Key::Deprecated => "Deprecated",
            Key::Experimental => "Experimental",
            Key::ScaleUnit => "ScaleUnit",
            Key::BriefDescription => "BriefDescription",
            Key::PublicDescription => "PublicDescription",
            Key::DataLa => "Data_LA",
            Key::Errata => "Errata",
            Key::Compat => "Compat",
            Key::ArchStdEvent => "ArchStdEvent",
            Key::MetricName => "MetricName",
            Key::MetricExpr => "MetricExpr",
            Key::MetricThreshold => "MetricThreshold",
            Key::MetricGroup => "MetricGroup",
            Key::MetricgroupNoGroup => "MetricgroupNoGroup",
            Key::DefaultMetricgroupName => "DefaultMetricgroupName",
            Key::MetricConstraint => "MetricConstraint",
            Key::AggregationMode => "AggregationMode",
        }
    }
}

/// The serde view of one array element: the known keys of an object, in file order, with what
/// perf would not read as a string kept aside so the loader can report it with the object's name.
#[derive(Default)]
pub(crate) struct JsonObject {
    fields: Vec<(Key, Result<String, &'static str>)>,
    /// Keys neither perf nor tmetric reads, as written.
    unknown: Vec<String>,
    /// Known keys that appeared more than once (the last value is kept, as Python's json does).
    duplicates: Vec<Key>,
    /// `Some(type)` when the element is not an object at all.
    not_object: Option<&'static str>,
}

impl<'de> Deserialize<'de> for JsonObject {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // `any`, not `map`: an element of another type is reported, not a reason to drop the file.
        deserializer.deserialize_any(ObjectVisitor)
    }
}

struct ObjectVisitor;

impl ObjectVisitor {
    fn other(found: &'static str) -> JsonObject {
        JsonObject { not_object: Some(found), ..JsonObject::default() }
    }
}

impl<'de> serde::de::Visitor<'de> for ObjectVisitor {
    type Value = JsonObject;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an event or metric object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<JsonObject, A::Error> {
        let mut object = JsonObject { fields: Vec::with_capacity(12), ..JsonObject::default() };
        while let Some(KeyName(key)) = map.next_key()? {
            let key = match key {
                Ok(key) => key,
                Err(unknown) => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    object.unknown.push(unknown);
                    continue;
                }
            };
            let value = match map.next_value::<Value>()? {
                Value::String(s) => Ok(s),
                // A JSON number means its decimal text: `"UMask": 4` is `"UMask": "4"`.
                Value::Number(n) => Ok(n.to_string()),
                Value::Null => Err("null"),
                Value::Bool(_) => Err("boolean"),
                Value::Array(_) => Err("array"),
                Value::Object(_) => Err("object"),
            };
            if let Some(slot) = object.fields.iter_mut().find(|(k, _)| *k == key) {
                slot.1 = value;
                object.duplicates.push(key);
            } else {
                object.fields.push((key, value));
            }
        }
        Ok(object)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<JsonObject, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(Self::other("array"))
    }

    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<JsonObject, E> {
        Ok(Self::other("string"))
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<JsonObject, E> {
        Ok(Self::other("boolean"))
    }

    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<JsonObject, E> {
        Ok(Self::other("number"))
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<JsonObject, E> {
        Ok(Self::other("number"))
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<JsonObject, E> {
        Ok(Self::other("number"))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<JsonObject, E> {
        Ok(Self::other("null"))
    }
}

/// A map key: the known [`Key`] it names, or the text of a key the loader ignores.
struct KeyName(Result<Key, String>);

impl<'de> Deserialize<'de> for KeyName {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl serde::de::Visitor<'_> for KeyVisitor {
            type Value = KeyName;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<KeyName, E> {
                Ok(KeyName(
                    ALL_KEYS
                        .iter()
                        .copied()
                        .find(|k| k.json_name() == key)
                        .ok_or_else(|| key.to_string()),
                ))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// One entry of `counter.json`, where the counts may be JSON integers or strings.
#[derive(Deserialize)]
#[allow(non_snake_case)]
pub(crate) struct CounterJson {
    pub Unit: Option<Value>,
    pub CountersNumFixed: Option<Value>,
    pub CountersNumGeneric: Option<Value>,
}

/// One object with its values sorted into usable strings and findings, plus where it is.
#[derive(Debug, Clone)]
pub(crate) struct RawObject {
    /// The known keys present with a string (or number) value.
    pub fields: Vec<(Key, String)>,
    /// Known keys whose value is null, a boolean, an array or an object: the JSON type.
    pub bad_types: Vec<(Key, &'static str)>,
    /// Unknown keys, as written.
    pub unknown: Vec<String>,
    /// Known keys written more than once.
    pub duplicates: Vec<Key>,
    /// Index in the file's array.
    pub index: usize,
    /// 1-based line of the object's `{`.
    pub line: usize,
    /// Byte offset of the object's `{` in its file (to find the line of any key on demand).
    pub start: usize,
    /// Lines of `EventName`, `MetricName`, `MetricExpr`, `MetricThreshold` (0 when absent).
    pub key_lines: [usize; 4],
}

impl RawObject {
    /// Splits the values into strings and wrong types. `Err(type)` when the element is not an object.
    pub(crate) fn new(
        object: JsonObject,
        index: usize,
        line: usize,
        start: usize,
        key_lines: [usize; 4],
    ) -> Result<RawObject, &'static str> {
        if let Some(found) = object.not_object {
            return Err(found);
        }
        let mut fields = Vec::with_capacity(object.fields.len());
        let mut bad_types = Vec::new();
        for (key, value) in object.fields {
            match value {
                Ok(text) => fields.push((key, text)),
                Err(found) => bad_types.push((key, found)),
            }
        }
        Ok(RawObject {
            fields,
            bad_types,
            unknown: object.unknown,
            duplicates: object.duplicates,
            index,
            line,
            start,
            key_lines,
        })
    }

    pub(crate) fn get(&self, key: Key) -> Option<&str> {
        self.fields.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str())
    }

    /// How error messages name this object.
    pub(crate) fn describe(&self) -> String {
        describe(
            self.get(Key::EventName).map(str::to_string),
            self.get(Key::MetricName).map(str::to_string),
            self.get(Key::ArchStdEvent).map(str::to_string),
            self.index,
        )
    }

    /// Line for messages: the `EventName` or `MetricName` key, else the `{`.
    pub(crate) fn name_line(&self) -> usize {
        [self.key_lines[0], self.key_lines[1]].into_iter().find(|&l| l != 0).unwrap_or(self.line)
    }
}

fn describe(
    event: Option<String>,
    metric: Option<String>,
    arch_std: Option<String>,
    index: usize,
) -> String {
    if let Some(name) = event {
        format!("event `{name}`")
    } else if let Some(name) = metric {
        format!("metric `{name}`")
    } else if let Some(name) = arch_std {
        format!("`ArchStdEvent` object `{name}`")
    } else {
        format!("object #{index}")
    }
}

/// The known key an unknown one is most likely a typo of: within two edits, and not a mere
/// prefix relation of short names (so `Offcore` is not taken for `Errata`).
pub(crate) fn nearest_key(unknown: &str) -> Option<&'static str> {
    ALL_KEYS
        .iter()
        .map(|k| (strsim::levenshtein(unknown, k.json_name()), k.json_name()))
        .filter(|(distance, name)| *distance <= 2 && name.len() > 4)
        .min()
        .map(|(_, name)| name)
}

const ALL_KEYS: [Key; KEY_COUNT] = [
    Key::EventName,
    Key::EventCode,
    Key::ExtSel,
    Key::ConfigCode,
    Key::EventidCode,
    Key::LegacyConfigCode,
    Key::LegacyCacheCode,
    Key::UMask,
    Key::CounterMask,
    Key::EdgeDetect,
    Key::Invert,
    Key::AnyThread,
    Key::PortMask,
    Key::FcMask,
    Key::SampleAfterValue,
    Key::NodeType,
    Key::RdWrMask,
    Key::EnAllCores,
    Key::EnAllSlices,
    Key::SliceId,
    Key::ThreadMask,
    Key::Filter,
    Key::MsrIndex,
    Key::MsrValue,
    Key::Unit,
    Key::Counter,
    Key::Pebs,
    Key::PerPkg,
    Key::Deprecated,
    Key::Experimental,
    Key::ScaleUnit,
    Key::BriefDescription,
    Key::PublicDescription,
    Key::DataLa,
    Key::Errata,
    Key::Compat,
    Key::ArchStdEvent,
    Key::MetricName,
    Key::MetricExpr,
    Key::MetricThreshold,
    Key::MetricGroup,
    Key::MetricgroupNoGroup,
    Key::DefaultMetricgroupName,
    Key::MetricConstraint,
    Key::AggregationMode,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_key() {
        assert_eq!(nearest_key("PublicDescrition"), Some("PublicDescription"));
        assert_eq!(nearest_key("BriefDescript6ion"), Some("BriefDescription"));
        assert_eq!(nearest_key("CollectPEBSRecord"), None);
        assert_eq!(nearest_key("UMaskExt"), None);
    }

    #[test]
    fn keys_table_is_in_enum_order() {
        for (slot, key) in ALL_KEYS.iter().enumerate() {
            assert_eq!(*key as usize, slot, "{}", key.json_name());
        }
    }
}
