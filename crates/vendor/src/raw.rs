//! The JSON objects of one file as read, before `ArchStdEvent` expansion: known keys only.
//!
//! Unknown keys, including the typos jevents.py also ignores (`BriefDescript6ion`,
//! `PublicDescrition`), are skipped. Values are kept as `serde_json::Value` until [`RawObject::new`]
//! checks that each is a string, so the error can name the object rather than a byte offset.

use serde::Deserialize;
use serde_json::Value;

use crate::error::ObjectError;

/// Every key the loader reads. The order is the order of [`RawObject::values`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Key {
    EventName,
    EventCode,
    ExtSel,
    ConfigCode,
    EventidCode,
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

/// The serde view of one object: the known keys present, in file order. Values of the wrong JSON
/// type are kept as the type's name so [`RawObject::new`] can report them with the object's name.
pub(crate) struct JsonObject {
    fields: Vec<(Key, Result<String, &'static str>)>,
}

impl<'de> Deserialize<'de> for JsonObject {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ObjectVisitor)
    }
}

struct ObjectVisitor;

impl<'de> serde::de::Visitor<'de> for ObjectVisitor {
    type Value = JsonObject;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an event or metric object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<JsonObject, A::Error> {
        let mut fields: Vec<(Key, Result<String, &'static str>)> = Vec::with_capacity(12);
        while let Some(KeyName(key)) = map.next_key()? {
            let Some(key) = key else {
                map.next_value::<serde::de::IgnoredAny>()?;
                continue;
            };
            if fields.iter().any(|(k, _)| *k == key) {
                return Err(serde::de::Error::custom(format_args!(
                    "duplicate key `{}`",
                    key.json_name()
                )));
            }
            let value = match map.next_value::<Value>()? {
                Value::String(s) => Ok(s),
                Value::Null => Err("null"),
                Value::Bool(_) => Err("boolean"),
                Value::Number(_) => Err("number"),
                Value::Array(_) => Err("array"),
                Value::Object(_) => Err("object"),
            };
            fields.push((key, value));
        }
        Ok(JsonObject { fields })
    }
}

/// A map key: the known [`Key`] it names, or `None` for keys the loader ignores.
struct KeyName(Option<Key>);

impl<'de> Deserialize<'de> for KeyName {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl serde::de::Visitor<'_> for KeyVisitor {
            type Value = KeyName;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<KeyName, E> {
                Ok(KeyName(ALL_KEYS.iter().copied().find(|k| k.json_name() == key)))
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

/// One object with its string values checked, plus where it is.
#[derive(Debug, Clone)]
pub(crate) struct RawObject {
    /// The known keys present, with their string values.
    pub fields: Vec<(Key, String)>,
    /// Index in the file's array.
    pub index: usize,
    /// 1-based line of the object's `{`.
    pub line: usize,
    /// Lines of `EventName`, `MetricName`, `MetricExpr`, `MetricThreshold` (0 when absent).
    pub key_lines: [usize; 4],
}

impl RawObject {
    /// Checks that every known value is a string. On error, returns the best name for the object.
    pub(crate) fn new(
        object: JsonObject,
        index: usize,
        line: usize,
        key_lines: [usize; 4],
    ) -> Result<RawObject, (String, ObjectError)> {
        let mut fields = Vec::with_capacity(object.fields.len());
        let mut wrong_type = None;
        for (key, value) in object.fields {
            match value {
                Ok(text) => fields.push((key, text)),
                Err(found) => {
                    wrong_type.get_or_insert((key, found));
                }
            }
        }
        let raw = RawObject { fields, index, line, key_lines };
        match wrong_type {
            None => Ok(raw),
            Some((key, found)) => {
                Err((raw.describe(), ObjectError::NotString { key: key.json_name(), found }))
            }
        }
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

const ALL_KEYS: [Key; KEY_COUNT] = [
    Key::EventName,
    Key::EventCode,
    Key::ExtSel,
    Key::ConfigCode,
    Key::EventidCode,
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
    fn keys_table_is_in_enum_order() {
        for (slot, key) in ALL_KEYS.iter().enumerate() {
            assert_eq!(*key as usize, slot, "{}", key.json_name());
        }
    }
}
