//! The JSON-RPC fields every encoding writes the same way: a token amount (`uiTokenAmount`) and
//! a versioned message's `addressTableLookups`. `encode` and `parse` both write them, so they sit
//! below both.

use serde_json::{json, Value};
use solana_message::VersionedMessage;

/// `uiTokenAmount`: the base units, their decimals and the decimal text.
pub fn token_amount(amount: u64, decimals: u8) -> Value {
    let text = decimal_string(amount, decimals);
    json!({
        "amount": amount.to_string(),
        "decimals": decimals,
        // uiAmount is a float by the RPC's definition; uiAmountString is exact.
        "uiAmount": text.parse::<f64>().ok(),
        "uiAmountString": text,
    })
}

/// `1234500` with 6 decimals is `"1.2345"`: exact, no float on the way.
pub fn decimal_string(amount: u64, decimals: u8) -> String {
    let scale = 10u64.pow(decimals as u32);
    let (whole, fraction) = (amount / scale, amount % scale);
    if fraction == 0 {
        return whole.to_string();
    }
    let fraction = format!("{fraction:0width$}", width = decimals as usize);
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

/// A versioned message's `addressTableLookups`, written the same in every encoding; None for legacy.
pub fn address_table_lookups(message: &VersionedMessage) -> Option<Value> {
    let lookups = message.address_table_lookups()?;
    Some(
        lookups
            .iter()
            .map(|l| {
                json!({
                    "accountKey": l.account_key.to_string(),
                    "writableIndexes": l.writable_indexes,
                    "readonlyIndexes": l.readonly_indexes,
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::decimal_string;

    #[test]
    fn decimal_strings_are_exact() {
        assert_eq!(decimal_string(0, 6), "0");
        assert_eq!(decimal_string(1, 6), "0.000001");
        assert_eq!(decimal_string(1_234_500, 6), "1.2345");
        assert_eq!(decimal_string(u64::MAX, 6), "18446744073709.551615");
        assert_eq!(decimal_string(42, 0), "42");
    }
}
