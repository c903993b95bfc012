//! Choosing a protocol version from a `protocol_negotiate` offer (whitepaper §8.3).

/// Picks the version to speak: of the names both sides list (exact match), the highest
/// `LightAICL_v<major>[.<minor>]`; names in another form rank below those, in our order.
///
/// ```
/// use concord_aicl::select_version;
///
/// let ours = ["LightAICL_v1", "LightAICL_v2"];
/// assert_eq!(select_version(&ours, &["LightAICL_v2", "LightAICL_v1"]), Some("LightAICL_v2"));
/// assert_eq!(select_version(&ours, &["LightAICL_v1", "LightAICL_v3"]), Some("LightAICL_v1"));
/// assert_eq!(select_version(&ours, &["LightAICL_v9"]), None);
/// ```
pub fn select_version<'a>(ours: &[&'a str], theirs: &[&str]) -> Option<&'a str> {
    ours.iter()
        .enumerate()
        .filter(|(_, name)| theirs.contains(name))
        .max_by_key(|(index, name)| (version_number(name), std::cmp::Reverse(*index)))
        .map(|(_, name)| *name)
}

/// `(major, minor)` of `LightAICL_v<major>[.<minor>]`.
fn version_number(name: &str) -> Option<(u64, u64)> {
    let number = name.strip_prefix("LightAICL_v")?;
    let (major, minor) = number.split_once('.').unwrap_or((number, "0"));
    Some((major.parse().ok()?, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_numerically() {
        assert!(version_number("LightAICL_v10") > version_number("LightAICL_v9"));
        assert!(version_number("LightAICL_v1.1") > version_number("LightAICL_v1"));
        assert_eq!(version_number("LightAICL"), None);
        let ours = ["custom", "LightAICL_v1"];
        assert_eq!(
            select_version(&ours, &["custom", "LightAICL_v1"]),
            Some("LightAICL_v1")
        );
        assert_eq!(select_version(&ours, &["custom"]), Some("custom"));
    }
}
