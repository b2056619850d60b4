//! Solana websocket subscriptions: signature, slot and logs. Each connection keeps its own
//! subscriptions and filters the chain's event stream; a signature subscription whose
//! transaction is already known is answered at once, as a validator does.

use std::{collections::HashMap, str::FromStr};

use anchor_lang::solana_program::pubkey::Pubkey;
use axum::extract::ws::{Message, WebSocket};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use solana_signature::Signature;
use tokio::sync::broadcast::{self, error::RecvError};

use crate::{
    chain::{ChainEvent, ChainHandle},
    encode,
    rpc::RpcError,
};

/// Subscriptions one connection may hold, so a client cannot grow server memory unbounded.
const MAX_SUBSCRIPTIONS: usize = 1_024;

enum Subscription {
    Signature(Signature),
    Slot,
    Logs(Option<Pubkey>),
}

pub async fn serve(socket: WebSocket, chain: ChainHandle, events: broadcast::Sender<ChainEvent>) {
    let (mut sink, mut stream) = socket.split();
    let mut feed = events.subscribe();
    let mut subscriptions: HashMap<u64, Subscription> = HashMap::new();
    let mut next_id = 1u64;
    loop {
        let outgoing: Vec<Value> = tokio::select! {
            message = stream.next() => match message {
                Some(Ok(Message::Text(text))) => {
                    handle_request(&text, &chain, &mut subscriptions, &mut next_id).await
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => Vec::new(),
            },
            event = feed.recv() => match event {
                Ok(event) => notifications(&event, &mut subscriptions),
                Err(RecvError::Lagged(_)) => Vec::new(),
                Err(RecvError::Closed) => return,
            },
        };
        for value in outgoing {
            if sink.send(Message::Text(value.to_string().into())).await.is_err() {
                return;
            }
        }
    }
}

async fn handle_request(
    text: &str,
    chain: &ChainHandle,
    subscriptions: &mut HashMap<u64, Subscription>,
    next_id: &mut u64,
) -> Vec<Value> {
    let Ok(request) = serde_json::from_str::<Value>(text) else {
        let error = RpcError { code: -32700, message: "Parse error".into(), data: None };
        return vec![json!({ "jsonrpc": "2.0", "error": error.to_json(), "id": null })];
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let method = request.get("method").and_then(Value::as_str).unwrap_or_default();
    let params = request.get("params").and_then(Value::as_array).cloned().unwrap_or_default();
    let reply = |result: Result<Value, RpcError>| match result {
        Ok(result) => json!({ "jsonrpc": "2.0", "result": result, "id": id }),
        Err(error) => json!({ "jsonrpc": "2.0", "error": error.to_json(), "id": id }),
    };

    if let Some(kind) = method.strip_suffix("Unsubscribe") {
        let sub = params.first().and_then(Value::as_u64);
        let removed = sub.is_some_and(|sub| {
            matches!(
                (kind, subscriptions.get(&sub)),
                ("signature", Some(Subscription::Signature(_))) | ("slot", Some(Subscription::Slot)) | ("logs", Some(Subscription::Logs(_)))
            ) && subscriptions.remove(&sub).is_some()
        });
        return vec![reply(if removed { Ok(json!(true)) } else { Err(RpcError::invalid_params("Invalid subscription id.")) })];
    }

    let subscription = match method {
        "signatureSubscribe" => params
            .first()
            .and_then(Value::as_str)
            .and_then(|s| Signature::from_str(s).ok())
            .map(Subscription::Signature)
            .ok_or_else(|| RpcError::invalid_params("Invalid param: not a signature")),
        "slotSubscribe" => Ok(Subscription::Slot),
        "logsSubscribe" => logs_filter(params.first()),
        _ => Err(RpcError::method_not_found(method)),
    };
    let subscription = match subscription {
        Ok(_) if subscriptions.len() >= MAX_SUBSCRIPTIONS => {
            return vec![reply(Err(RpcError { code: -32603, message: "too many subscriptions".into(), data: None }))];
        }
        Ok(subscription) => subscription,
        Err(error) => return vec![reply(Err(error))],
    };

    let sub = *next_id;
    *next_id += 1;
    let mut out = vec![reply(Ok(json!(sub)))];
    if let Subscription::Signature(signature) = &subscription {
        let signature = *signature;
        let known = chain
            .call(move |c| c.transaction(&signature).map(|tx| (tx.slot, tx.status.clone().err())))
            .await;
        if let Some((slot, err)) = known {
            out.push(signature_notification(sub, slot, &err));
            return out;
        }
    }
    subscriptions.insert(sub, subscription);
    out
}

fn logs_filter(filter: Option<&Value>) -> Result<Subscription, RpcError> {
    match filter {
        Some(Value::String(all)) if all == "all" || all == "allWithVotes" => Ok(Subscription::Logs(None)),
        Some(Value::Object(object)) => {
            let mentions = object.get("mentions").and_then(Value::as_array);
            match mentions.map(|m| m.as_slice()) {
                Some([Value::String(key)]) => Pubkey::from_str(key)
                    .map(|key| Subscription::Logs(Some(key)))
                    .map_err(|_| RpcError::invalid_params("Invalid param: Invalid")),
                _ => Err(RpcError::invalid_params("mentions takes exactly one address")),
            }
        }
        _ => Err(RpcError::invalid_params("logs filter must be \"all\" or { mentions: [address] }")),
    }
}

fn signature_notification(sub: u64, slot: u64, err: &Option<solana_transaction_error::TransactionError>) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "signatureNotification",
        "params": { "result": { "context": { "slot": slot }, "value": { "err": encode::error(err) } }, "subscription": sub },
    })
}

fn notifications(event: &ChainEvent, subscriptions: &mut HashMap<u64, Subscription>) -> Vec<Value> {
    let mut out = Vec::new();
    let mut finished = Vec::new();
    for (&sub, subscription) in subscriptions.iter() {
        match (subscription, event) {
            (Subscription::Slot, ChainEvent::Slot { slot, parent, root }) => out.push(json!({
                "jsonrpc": "2.0",
                "method": "slotNotification",
                "params": { "result": { "slot": slot, "parent": parent, "root": root }, "subscription": sub },
            })),
            (Subscription::Signature(wanted), ChainEvent::Transaction { signature, slot, err, .. }) if wanted == signature => {
                out.push(signature_notification(sub, *slot, err));
                finished.push(sub);
            }
            (Subscription::Logs(filter), ChainEvent::Transaction { signature, slot, err, logs, accounts })
                if filter.is_none_or(|key| accounts.contains(&key)) =>
            {
                out.push(json!({
                    "jsonrpc": "2.0",
                    "method": "logsNotification",
                    "params": {
                        "result": { "context": { "slot": slot }, "value": { "signature": signature.to_string(), "err": encode::error(err), "logs": logs } },
                        "subscription": sub,
                    },
                }));
            }
            _ => {}
        }
    }
    for sub in finished {
        subscriptions.remove(&sub);
    }
    out
}
