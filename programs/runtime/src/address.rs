//! The addresses payment_ledger derives (config, payer state, invocation, event authority) and
//! the associated token accounts a payment moves tokens between. Instruction builders
//! (`client`, `channel`) and the runtime's own helpers (`ledger`) all name accounts through here.

use anchor_lang::solana_program::pubkey::Pubkey;

pub fn config_address() -> Pubkey {
    Pubkey::find_program_address(&[payment_ledger::CONFIG_SEED], &payment_ledger::ID).0
}

pub fn payer_state_address(payer: &Pubkey) -> Pubkey {
    Pubkey::find_program_address(&[payment_ledger::PAYER_SEED, payer.as_ref()], &payment_ledger::ID).0
}

pub fn invocation_address(parent_signature: &[u8; 64], sub_agent: &Pubkey) -> Pubkey {
    Pubkey::find_program_address(
        &[
            payment_ledger::INVOCATION_SEED,
            &parent_signature[..32],
            &parent_signature[32..],
            sub_agent.as_ref(),
        ],
        &payment_ledger::ID,
    )
    .0
}

pub fn event_authority_address() -> Pubkey {
    Pubkey::find_program_address(&[b"__event_authority"], &payment_ledger::ID).0
}

pub fn associated_token_address(owner: &Pubkey, mint: &Pubkey) -> Pubkey {
    spl_associated_token_account_interface::address::get_associated_token_address(owner, mint)
}
