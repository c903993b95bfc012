//! Field-name styles: `productId`, `product_id`, `product-id`, `ProductId` are one field.

/// A naming style for JSON field names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NamingStyle {
    /// `productId`
    CamelCase,
    /// `product_id`
    SnakeCase,
    /// `product-id`
    KebabCase,
    /// `ProductId`
    PascalCase,
}

/// The words of a field name, lowercase: `productId` → `["product", "id"]`.
pub fn words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = name.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c == '_' || c == '-' || c == ' ' || c == '.' {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            continue;
        }
        let boundary = c.is_uppercase()
            && !current.is_empty()
            && (chars
                .get(i.wrapping_sub(1))
                .is_some_and(|p| p.is_lowercase() || p.is_ascii_digit())
                || chars.get(i + 1).is_some_and(|n| n.is_lowercase()));
        if boundary {
            words.push(std::mem::take(&mut current));
        }
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// The style-independent key of a field name: its words joined (`productId` → `productid`).
pub fn key(name: &str) -> String {
    words(name).concat()
}

/// Writes `name` in `style`.
///
/// ```
/// use concord_negotiate::naming::{convert, NamingStyle};
///
/// assert_eq!(convert("product_id", NamingStyle::CamelCase), "productId");
/// assert_eq!(convert("productID", NamingStyle::SnakeCase), "product_id");
/// assert_eq!(convert("HTTPStatusCode", NamingStyle::KebabCase), "http-status-code");
/// ```
pub fn convert(name: &str, style: NamingStyle) -> String {
    let words = words(name);
    let capitalised = |word: &String| {
        let mut chars = word.chars();
        chars
            .next()
            .map(|first| first.to_uppercase().chain(chars).collect::<String>())
            .unwrap_or_default()
    };
    match style {
        NamingStyle::SnakeCase => words.join("_"),
        NamingStyle::KebabCase => words.join("-"),
        NamingStyle::PascalCase => words.iter().map(capitalised).collect(),
        NamingStyle::CamelCase => words
            .iter()
            .enumerate()
            .map(|(i, word)| {
                if i == 0 {
                    word.clone()
                } else {
                    capitalised(word)
                }
            })
            .collect(),
    }
}

/// The style a name is written in, when it has more than one word to tell by.
pub fn style_of(name: &str) -> Option<NamingStyle> {
    if words(name).len() < 2 {
        return None;
    }
    if name.contains('_') {
        Some(NamingStyle::SnakeCase)
    } else if name.contains('-') {
        Some(NamingStyle::KebabCase)
    } else if name.starts_with(char::is_uppercase) {
        Some(NamingStyle::PascalCase)
    } else {
        Some(NamingStyle::CamelCase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_every_style() {
        for name in [
            "productId",
            "product_id",
            "product-id",
            "ProductId",
            "PRODUCT_ID",
        ] {
            assert_eq!(words(name), vec!["product", "id"], "{name}");
        }
        assert_eq!(words("productID"), vec!["product", "id"]);
        assert_eq!(words("httpStatus2xx"), vec!["http", "status2xx"]);
        assert_eq!(key("product-name"), key("productName"));
    }

    #[test]
    fn styles_are_detected() {
        assert_eq!(style_of("productId"), Some(NamingStyle::CamelCase));
        assert_eq!(style_of("product_id"), Some(NamingStyle::SnakeCase));
        assert_eq!(style_of("price"), None);
    }
}
