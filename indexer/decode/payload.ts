/**
 * The JSON form of an event stored in `chain_events.payload`: integers as decimal strings (u64
 * can exceed 2^53 and int8), keys and signatures base58, hashes hex. Projections read these keys.
 * Channel events are projected by store/channels.ts (the charges a settlement covers arrive as
 * `PaymentRecorded` and are projected as payments, linked to their channel there).
 */
import bs58 from "bs58";
import type { LedgerEvent } from "../../programs/payment_ledger/ts/index.js";

export type EventPayload = Record<string, string | number | boolean | null | Record<string, string>>;

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex");

export function eventPayload(event: LedgerEvent): EventPayload {
  switch (event.name) {
    case "PaymentRecorded": {
      const d = event.data;
      return {
        payer: d.payer.toBase58(),
        payee: d.payee.toBase58(),
        paymentId: d.paymentId.toString(),
        amountUnits: d.amountUnits.toString(),
        mint: d.mint.toBase58(),
        protocol: d.protocol,
        rail: d.rail,
        endpointHash: hex(d.endpointHash),
        atomic: d.atomic,
        settlementReference: d.settlementReference === null ? null : bs58.encode(d.settlementReference),
        parent:
          d.parent === null
            ? null
            : {
                invocation: d.parent.invocation.toBase58(),
                parentSignature: bs58.encode(d.parent.parentSignature),
                budgetUnits: d.parent.budgetUnits.toString(),
                spentUnits: d.parent.spentUnits.toString(),
              },
        recordedAtSeconds: d.recordedAtSeconds,
        slot: d.slot.toString(),
      };
    }
    case "InvocationOpened": {
      const d = event.data;
      return {
        invocation: d.invocation.toBase58(),
        invoker: d.invoker.toBase58(),
        subAgent: d.subAgent.toBase58(),
        parentSignature: bs58.encode(d.parentSignature),
        budgetUnits: d.budgetUnits.toString(),
        openedAtSeconds: d.openedAtSeconds,
        slot: d.slot.toString(),
      };
    }
    case "ConfigInitialized": {
      const d = event.data;
      return {
        authority: d.authority.toBase58(),
        settlementMint: d.settlementMint.toBase58(),
        treasury: d.treasury.toBase58(),
        decimals: d.decimals,
      };
    }
    case "ChannelOpened": {
      const d = event.data;
      return {
        channel: d.channel.toBase58(),
        payer: d.payer.toBase58(),
        payee: d.payee.toBase58(),
        mint: d.mint.toBase58(),
        channelId: hex(d.channelId),
        depositUnits: d.depositUnits.toString(),
        protocol: d.protocol,
        invocation: d.invocation === null ? null : d.invocation.toBase58(),
        expiresAtSeconds: d.expiresAtSeconds,
        withdrawDelaySeconds: d.withdrawDelaySeconds,
        openedAtSeconds: d.openedAtSeconds,
        slot: d.slot.toString(),
      };
    }
    case "ChannelToppedUp": {
      const d = event.data;
      return {
        channel: d.channel.toBase58(),
        amountUnits: d.amountUnits.toString(),
        depositUnits: d.depositUnits.toString(),
        slot: d.slot.toString(),
      };
    }
    case "ChannelSettled": {
      const d = event.data;
      return {
        channel: d.channel.toBase58(),
        payer: d.payer.toBase58(),
        payee: d.payee.toBase58(),
        settler: d.settler.toBase58(),
        cumulativeUnits: d.cumulativeUnits.toString(),
        deltaUnits: d.deltaUnits.toString(),
        sequence: d.sequence.toString(),
        chargeCount: d.chargeCount,
        chargesDigest: hex(d.chargesDigest),
        slot: d.slot.toString(),
      };
    }
    case "ChannelCloseRequested": {
      const d = event.data;
      return {
        channel: d.channel.toBase58(),
        requestedBy: d.requestedBy.toBase58(),
        closeRequestedAtSeconds: d.closeRequestedAtSeconds,
        refundableAtSeconds: d.refundableAtSeconds,
        slot: d.slot.toString(),
      };
    }
    case "ChannelClosed": {
      const d = event.data;
      return {
        channel: d.channel.toBase58(),
        payer: d.payer.toBase58(),
        payee: d.payee.toBase58(),
        closedBy: d.closedBy.toBase58(),
        depositUnits: d.depositUnits.toString(),
        settledUnits: d.settledUnits.toString(),
        refundedUnits: d.refundedUnits.toString(),
        sequence: d.sequence.toString(),
        forced: d.forced,
        slot: d.slot.toString(),
      };
    }
  }
}
