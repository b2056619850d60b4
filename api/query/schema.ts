/**
 * The GraphQL schema of the query service. Names follow the spec (2.2, 2.4-2.6, 4.2, 4.7, 4.8).
 * Money: `amount`-like fields are decimal strings of USDC ("1.500000", 6 decimals, never floats);
 * the matching `...Units` field is the same amount in integer base units (a string: it may exceed
 * 2^53). Times are ISO 8601 UTC strings.
 */
export const typeDefs = /* GraphQL */ `
  "Payment protocol (spec 2.2)."
  enum Protocol {
    x402
    mpp
  }

  "confirmed / finalized: recorded on the ledger chain at that commitment; rejected: refused by a policy, never on the chain."
  enum TransactionStatus {
    confirmed
    finalized
    rejected
  }

  "A custom time range; both ends are rounded down to the minute."
  input TimeRangeInput {
    from: String!
    to: String!
  }

  type Query {
    "Spec 4.7 agents.list: the account's agents; archived ones only with includeArchived."
    agents(includeArchived: Boolean = false): [Agent!]!
    "Spec 4.7 wallet.get."
    wallet(agentId: ID!): Wallet!
    "Spec 4.7 transactions.get: null when no payment of the account's agents has this hash."
    transaction(txHash: String!): Transaction
    "Spec 4.7 transactions.list, newest first. limit 1..200 (default 50); since: window such as 24h; after: pageInfo.endCursor."
    transactions(
      agentId: ID
      limit: Int
      protocol: Protocol
      domain: String
      since: String
      status: TransactionStatus
      after: String
      "Only rejected payments with this spec 7 reason code (implies status rejected)."
      reason: String
    ): TransactionConnection!
    "Payments whose payee is one of the account's agents, whoever paid (payers of the official x402 and MPP clients included), newest first. limit 1..200 (default 50)."
    receivedPayments(agentId: ID, limit: Int): [ReceivedPayment!]!
    "Spec 4.7 transactions.getChain / 4.8 transactions tree. maxDepth 0..64 (default 16), nodeLimit 1..5000 (default 500). Null when the root is not a payment of the account."
    paymentTree(rootTxHash: String!, maxDepth: Int, nodeLimit: Int): PaymentTree
    "Spec 4.8 cli spend. window: 1h, 24h (default), 7d, 30d, or custom with range."
    spendSummary(agentId: ID, window: String, range: TimeRangeInput): SpendSummary!
    "Spec 4.2. metrics: spend, tx_count, policy_violations, protocol_split (default all). resolution: 1m, 5m, 15m, 1h, 6h, 1d. Without agentId: every agent of the account."
    metrics(agentId: ID, metrics: [String!], window: String, range: TimeRangeInput, resolution: String): Metrics!
    "The agents.invoke budgets opened under the invoking transaction, and what they consumed. Null when none is visible."
    invocation(txHash: String!): Invocation
    "invocation for several invoking transactions at once (at most 100): one entry per hash that opened a visible budget, in the order asked."
    invocations(txHashes: [String!]!): [Invocation!]!
    "Spec 2.1 policy read view: the limits with usedToday and the rate-limit usage in its window."
    policy(agentId: ID!): Policy!
    "The policy read view of the account's agents (archived ones only with includeArchived), by agent id, at most 200."
    policies(includeArchived: Boolean = false): [Policy!]!
    "Dry run of the spend policy for a payment now (records nothing). amount: decimal USDC, e.g. 0.25."
    checkPolicy(agentId: ID!, endpoint: String!, amount: String!, protocol: ProtocolPreference): PolicyCheck!
    "Backtest (docs/policy.md Backtest): the agent's recorded payment attempts of the window (1h..90d back from now, e.g. 30d) replayed through the policy engine with a candidate policy, given as JSON text in the form PUT /v1/policies/{agentId} takes (an omitted field is no limit). Records nothing. limit: decisions listed, 0..10000 (default 1000); totals cover every attempt."
    simulatePolicy(agentId: ID!, policy: String!, window: String!, limit: Int): PolicySimulation!
    "policies.history: the agent's policy versions, newest first (docs/policy.md Versions). first 1..100 (default 20); before: only versions below this number."
    policyHistory(agentId: ID!, first: Int = 20, before: Int): [PolicyVersion!]!
    "Payment channels (sessions) whose payer is one of the account's agents, newest first. first 1..100 (default 20); after: pageInfo.endCursor."
    channels(agentId: ID, status: ChannelStatus, first: Int, after: String): ChannelConnection!
    "One channel by its address; null when its payer is not one of the account's agents."
    channel(address: String!): Channel
    "Payments the account's policies held for a person (docs/policy.md Approvals), newest first. status and agentId filter; first 1..100 (default 20); after: pageInfo.endCursor. Admin and approver keys only."
    approvals(status: ApprovalStatus, agentId: ID, first: Int, after: String): ApprovalConnection!
    "One approval by its id; null when it is not the account's (for an agent key: not its agent's)."
    approval(id: ID!): Approval
    "A page of the account's agents by id (archived last, only with includeArchived), those whose id or name contains search (at most 128 characters). first 1..100 (default 50), offset 0..100000."
    agentList(search: String, includeArchived: Boolean = false, first: Int, offset: Int): AgentConnection!
    "Daily-budget use of the account's active agents that have a daily budget (as Query.policy reads it), with the number in each state. order use (default): highest share first. first 1..100 (default 50), offset 0..100000."
    budgetUse(state: BudgetState, order: BudgetOrder, first: Int, offset: Int): BudgetUseConnection!
    "The account's rejected payments since a window ago (default 1h, at most 366d), counted by reason code, most frequent first."
    rejectionCounts(since: String): [RejectionCount!]!
    "The account's webhook deliveries created since a window ago (default 24h) that failed for good or are being retried."
    webhookHealth(since: String): WebhookHealth!
    "How far the indexer has come; null before its first checkpoint."
    indexerStatus: IndexerStatus
    "Runs (spec 4.7): the account's top-level payments with payments invoked under them, each with its tree's totals. order recent (default) or cost. first 1..100 (default 50), offset 0..100000."
    runs(agentId: ID, order: RunOrder, first: Int, offset: Int): RunConnection!
  }

  enum BudgetState {
    open
    warning
    exhausted
  }

  enum BudgetOrder {
    use
    agent
  }

  enum RunOrder {
    recent
    cost
  }

  type AgentConnection {
    nodes: [Agent!]!
    "How many agents match (every page)."
    totalCount: Int!
  }

  "One agent's daily-budget use now."
  type BudgetUse {
    agentId: ID!
    dailyBudget: String!
    dailyBudgetUnits: String!
    usedToday: String!
    usedTodayUnits: String!
    "usedToday / dailyBudget in percent, rounded down to two decimals."
    percent: String!
    "open, warning (80 %) or exhausted (spec 3)."
    budgetState: BudgetState!
    windowResetsAt: String
  }

  type BudgetUseConnection {
    nodes: [BudgetUse!]!
    "Agents with a daily budget (every state)."
    totalCount: Int!
    warningCount: Int!
    exhaustedCount: Int!
  }

  type RejectionCount {
    "Spec 7 reason code, e.g. daily_budget_exceeded."
    reasonCode: String!
    count: Int!
  }

  type WebhookHealth {
    since: String!
    "Deliveries given up on after their last attempt."
    failed: Int!
    "Deliveries pending after at least one failed attempt."
    retrying: Int!
    "The error of the newest of them."
    lastError: String
  }

  type IndexerStatus {
    "The slot the indexer's most recent checkpoint reached."
    slot: String!
    "When that checkpoint was committed."
    checkpointAt: String!
    "Seconds from checkpointAt to now: how long since the indexer last committed."
    secondsSinceCheckpoint: Int!
    "Block time of the newest payment the indexer has stored."
    latestPaymentAt: String
  }

  "A run: a top-level payment of the account and everything invoked under it (the account's payments)."
  type Run {
    rootTxHash: String!
    "The agent that made the root payment."
    agentId: ID!
    timestamp: String!
    "Total cost: every payment of the tree, the root's included."
    total: String!
    totalUnits: String!
    paymentCount: Int!
    agentCount: Int!
    "Sum of the agents.invoke budgets opened in the run, and what they consumed; null without any."
    budget: String
    budgetUnits: String
    budgetSpent: String
    budgetSpentUnits: String
  }

  type RunConnection {
    nodes: [Run!]!
    totalCount: Int!
  }

  "opening / failed: the gateway's, before the chain has the channel; open, closing (close requested, refund pending), closed: as the chain recorded them."
  enum ChannelStatus {
    opening
    open
    closing
    closed
    failed
  }

  "signed: voucher handed to the payer's client; accepted: the payee took it, NOT yet on chain; settled: covered by a settle_channel transaction; void: never accepted, never paid."
  enum ChannelChargeStatus {
    signed
    accepted
    settled
    void
  }

  """
  An escrowed payment channel (docs/ledger.md §5): a deposit, vouchers with a rising
  cumulative amount, settlements that pay the payee, a close that refunds the rest. Chain values
  (deposit, settled, refunded, status) come from the indexer; signed and accepted from the gateway.
  accepted - settled is owed to the payee but not on chain yet: never confirmed.
  """
  type Channel {
    "The Channel account address (base58)."
    address: ID!
    "The paying agent."
    agentId: ID!
    agent: Agent
    payer: String!
    payee: String!
    mint: String!
    "The payer's 32-byte channel id, hex."
    channelId: String!
    protocol: Protocol!
    "scheme://host[:port] the session pays; null for a channel the gateway did not open."
    serviceOrigin: String
    invocation: String
    parentTxHash: String
    status: ChannelStatus!
    "True once the indexer has the channel's opening."
    onChain: Boolean!
    "Past expiresAt and not closed: the payer may force-close, a payee's unsettled vouchers are at risk."
    expired: Boolean!
    deposit: String!
    depositUnits: String!
    "Highest voucher the gateway signed."
    signed: String!
    signedUnits: String!
    signedSequence: String!
    "Highest voucher the payee accepted (at least what is settled)."
    accepted: String!
    acceptedUnits: String!
    acceptedSequence: String!
    "Highest voucher settled on chain."
    settled: String!
    settledUnits: String!
    settledSequence: String!
    "accepted - settled: owed, not on chain yet."
    acceptedUnsettled: String!
    acceptedUnsettledUnits: String!
    "Returned to the payer at close; null until closed."
    refunded: String
    refundedUnits: String
    "Closed by the payer after expiry without a close request."
    forced: Boolean!
    settlementCount: Int!
    openTx: String
    openedAt: String!
    expiresAt: String!
    withdrawDelaySeconds: Int!
    closeRequestedAt: String
    "From this time the payer may take the refund."
    refundableAt: String
    closeTx: String
    closedAt: String
    "Settlements on chain, newest first. first 1..100 (default 20)."
    settlements(first: Int): [ChannelSettlement!]!
    "Charges, newest first. first 1..200 (default 50); after: pageInfo.endCursor."
    charges(first: Int, after: String): ChannelChargeConnection!
  }

  "One settle_channel (or the final settlement of a close) as the chain recorded it."
  type ChannelSettlement {
    txHash: String!
    settler: String!
    "The voucher settled: cumulative amount and sequence."
    cumulative: String!
    cumulativeUnits: String!
    "Paid to the payee by this settlement."
    delta: String!
    deltaUnits: String!
    sequence: String!
    chargeCount: Int!
    slot: String!
    timestamp: String
    "confirmed or finalized."
    status: TransactionStatus!
  }

  "One charge (one paid request) on a channel."
  type ChannelCharge {
    paymentId: String!
    "Null for a charge the chain recorded that the gateway has no row of."
    sequence: String
    amount: String!
    amountUnits: String!
    "The voucher's cumulative amount after this charge."
    cumulative: String
    cumulativeUnits: String
    endpoint: String!
    status: ChannelChargeStatus!
    "The settlement transaction, once settled."
    settlementTx: String
    "confirmed / finalized once the indexer has the charge's payment record; null before (an accepted charge is never confirmed)."
    chainStatus: TransactionStatus
    solanaExplorer: String
    signedAt: String
    acceptedAt: String
    settledAt: String
  }

  enum ApprovalStatus {
    pending
    approved
    denied
    expired
  }

  "A payment held by the policy's approval rules until a person decides (docs/policy.md Approvals)."
  type Approval {
    id: ID!
    agentId: ID!
    amount: String!
    amountUnits: String!
    endpoint: String!
    domain: String!
    "The approval rule that held it: above, domains or firstPaymentToDomain."
    rule: String!
    "approval_required: ... (docs/policy.md What holds a payment)."
    reason: String!
    status: ApprovalStatus!
    requestedAt: String!
    "Decided by the gateway's clock: still pending at this time, it expires (onTimeout deny)."
    expiresAt: String!
    decidedAt: String
    "The deciding API key's id, link (the signed one-time link) or timeout; null while pending."
    decidedBy: String
    note: String
    "For an approved payment: authorized, or refused when the re-run policy refused it; null otherwise."
    outcome: String
  }

  type ApprovalConnection {
    nodes: [Approval!]!
    pageInfo: PageInfo!
  }

  "The policy's approval field: which payments are held for a person."
  type ApprovalPolicy {
    "Held when the amount is strictly above this (decimal USDC); null: no amount rule."
    above: String
    aboveUnits: String
    domains: [String!]!
    firstPaymentToDomain: Boolean!
    "How long a held payment waits, e.g. 15m (1s..7d)."
    timeout: String!
    onTimeout: String!
  }

  type ChannelConnection {
    nodes: [Channel!]!
    pageInfo: PageInfo!
  }

  type ChannelChargeConnection {
    nodes: [ChannelCharge!]!
    pageInfo: PageInfo!
  }

  enum ProtocolPreference {
    auto
    x402
    mpp
  }

  type RateLimit {
    calls: Int!
    "1m, 5m, 15m, 1h or 24h."
    window: String!
  }

  type RateUsage {
    "Payment calls in the rate window ending now (0 without a rate limit)."
    calls: Int!
    limit: Int
    window: String
  }

  "Spec 2.1. A null limit is no limit; allowedDomains null = any domain."
  type Policy {
    agentId: ID!
    dailyBudget: String
    dailyBudgetUnits: String
    perCallLimit: String
    perCallLimitUnits: String
    allowedDomains: [String!]
    blockedDomains: [String!]!
    rateLimit: RateLimit
    protocolPreference: ProtocolPreference!
    usedToday: String!
    usedTodayUnits: String!
    "open, warning (80 %) or exhausted (spec 3)."
    budgetState: String!
    windowStart: String
    windowResetsAt: String
    rateUsage: RateUsage!
    "Payments held for a person; null when the policy holds none."
    approval: ApprovalPolicy
    "Limits per host or host and path prefix, on top of the agent's own (docs/policy.md Endpoint budgets)."
    endpointBudgets: [EndpointBudget!]!
    "The policy's current version (0: never set); Query.policyHistory lists them."
    version: Int!
    "Null when the agent has no stored policy."
    updatedAt: String
  }

  "What the candidate policy would have done to one recorded attempt."
  enum SimulatedOutcome {
    pass
    refuse
    needs_approval
  }

  type PolicySimulation {
    agentId: ID!
    window: String!
    from: String!
    to: String!
    "The window held more than 200,000 attempts: the oldest 200,000 were replayed."
    truncated: Boolean!
    totals: PolicySimulationTotals!
    "The decisions, oldest first (at most limit)."
    payments: [SimulatedPayment!]!
  }

  type SimulationCount {
    count: Int!
    amount: String!
    amountUnits: String!
  }

  type SimulationRuleCount {
    "A refusal's reason code (e.g. daily_budget_exceeded) or an approval rule (above, domains, firstPaymentToDomain)."
    rule: String!
    count: Int!
    amount: String!
    amountUnits: String!
  }

  type SimulationDomainCount {
    domain: String!
    count: Int!
    amount: String!
    amountUnits: String!
  }

  type PolicySimulationTotals {
    attempts: Int!
    passed: SimulationCount!
    refused: SimulationCount!
    needsApproval: SimulationCount!
    "Attempts whose outcome differs from what was recorded."
    changed: Int!
    refusedByRule: [SimulationRuleCount!]!
    refusedByDomain: [SimulationDomainCount!]!
    needsApprovalByRule: [SimulationRuleCount!]!
  }

  type SimulatedPayment {
    "reservation:<id>, approval:<id> or rejection:<id>."
    id: ID!
    at: String!
    endpoint: String!
    domain: String!
    amount: String!
    amountUnits: String!
    protocol: Protocol
    "What happened to it then."
    recorded: SimulatedOutcome!
    "What the candidate would have decided."
    outcome: SimulatedOutcome!
    rule: String
    "The engine's refusal or approval text."
    reason: String
  }

  "One endpointBudgets rule: limits of the payments its match covers. A null limit is no limit."
  type EndpointBudget {
    "A host (spec 2.1 domain rules) or host and path prefix, e.g. api.example.com/v1/search."
    match: String!
    dailyBudget: String
    dailyBudgetUnits: String
    perCallLimit: String
    perCallLimitUnits: String
    rateLimit: RateLimit
  }

  "One version of an agent's policy: who changed it, when, the whole policy and its hash."
  type PolicyVersion {
    agentId: ID!
    version: Int!
    createdAt: String!
    "key:<api key id>, admin or system."
    createdBy: String!
    "SHA-256 (hex) of the stored policy document."
    hash: String!
    "The whole policy as JSON (money in base units as decimal strings)."
    policy: String!
  }

  type PolicyCheck {
    agentId: ID!
    allowed: Boolean!
    "allow or reject."
    decision: String!
    "e.g. per_call_limit_exceeded; null when allowed."
    reasonCode: String
    "The refusal text (docs/policy.md Refusal texts): spec 7's <reason_code>: requested <amount> <unit>, limit is <amount> <unit> where a limit exists; the domain and the rule for domain refusals."
    reason: String
    "The spec 7 client error class the rejection maps to."
    errorClass: String
    "The endpointBudgets rule (its match) that refused the payment; null when allowed or when the agent's own limits refused it."
    endpointRule: String
    domain: String!
    protocol: Protocol
    "The daily budget after this payment if allowed, as it stands if rejected."
    budgetState: String!
    budgetUsed: String!
    budgetUsedUnits: String!
    budgetLimit: String
    budgetLimitUnits: String
    "budget.warning when this payment would cross 80 % of the daily budget."
    warnings: [String!]!
  }

  type Subscription {
    "Live feed (spec 4.9): each new ledger transaction of the account's agents (or of one agent)."
    transactionRecorded(agentId: ID): Transaction!
    "Live feed of payment channels: each channel event of the account's agents (or of one agent) the indexer stores, with the channel as it stands after it. A settlement's charges also arrive on transactionRecorded."
    channelUpdated(agentId: ID): ChannelUpdate!
  }

  type ChannelUpdate {
    "opened, toppedUp, settled, closeRequested or closed."
    event: String!
    txHash: String!
    slot: String!
    channel: Channel!
  }

  "Spec 2.5."
  type Agent {
    agentId: ID!
    name: String!
    walletAddress: String!
    createdAt: String!
    "Exact decimal USDC; 0 for a wallet never funded (no token account yet). Null only when the server reads no chain balances."
    balance: String
    balanceUnits: String
    "When the agent was archived (it can no longer pay or be funded; its history stays readable); null while active."
    archivedAt: String
  }

  "Spec 2.4."
  type Wallet {
    agentId: ID!
    address: String!
    balance: String
    balanceUnits: String
    network: String!
  }

  "Spec 2.2."
  type Transaction {
    "The txHash, or rejection:<n> for a rejected payment."
    id: ID!
    "Null for a rejected payment (it never reached the chain)."
    txHash: String
    agentId: ID!
    agent: Agent
    "Null for a payment rejected before a protocol was chosen."
    protocol: Protocol
    rail: String
    amountPaid: String!
    amountPaidUnits: String!
    "Host and path without scheme; the endpoint hash when the gateway does not know its text."
    endpoint: String!
    domain: String
    "passed for recorded payments, failed for rejected ones."
    policyCheck: String!
    parentTxHash: String
    "The invoking transaction, when its payer is one of the account's agents."
    parent: Transaction
    solanaExplorer: String
    timestamp: String!
    "0 for a top-level payment; n for a payment n invocations below its root."
    depth: Int!
    status: TransactionStatus!
    "verified / unverified for payments settled by a separate transaction; null otherwise."
    settlementStatus: String
    "Machine code of the rejection, e.g. per_call_limit_exceeded."
    rejectionCode: String
    "Spec 7: <reason_code>: requested <amount> <unit>, limit is <amount> <unit>."
    rejectionReason: String
    "The requested amount of a rejection, from its reason (usdc decimal, or a call count for the rate limit)."
    rejectionRequested: String
    "The limit the rejection names (what was left of a budget, the per-call limit, the rate-limit calls)."
    rejectionLimit: String
    "The unit of rejectionRequested and rejectionLimit: usdc, or calls/<window> for the rate limit."
    rejectionUnit: String
    "The agent's policy version this payment or refusal was decided under (Query.policyHistory); null when unknown (made before versions, or not through the gateway)."
    policyVersion: Int
    "Payments made under this one (agents.invoke) by the account's agents; 0 for a rejected payment."
    childCount: Int!
    "The run this payment belongs to: the root of its payment tree (walking up parent links through the account's payments); itself for a top-level payment; null for a rejected one."
    runRootTxHash: String
    "The payment channel this payment was settled from (a charge of a session); null otherwise."
    channel: Channel
  }

  "A payment one of the account's agents received, as recorded on chain."
  type ReceivedPayment {
    txHash: String!
    "The paying wallet: an agent's, or a wallet the gateway does not hold (an official x402 / MPP client)."
    payer: String!
    "The receiving agent."
    agentId: ID!
    agent: Agent
    protocol: Protocol!
    rail: String!
    amountPaid: String!
    amountPaidUnits: String!
    endpoint: String!
    domain: String
    "The transfer transaction, for a payment settled by a separate transaction."
    settlementReference: String
    "verified once the indexer checked the referenced transfer (amount, mint, payer, payee); unverified otherwise; null when the record moved the tokens itself."
    settlementStatus: String
    solanaExplorer: String
    timestamp: String!
    status: TransactionStatus!
  }

  type PageInfo {
    hasNextPage: Boolean!
    endCursor: String
  }

  type TransactionConnection {
    nodes: [Transaction!]!
    pageInfo: PageInfo!
  }

  type PaymentTreeNode {
    txHash: String!
    "Null for the root."
    parentTxHash: String
    "0 for the root."
    depth: Int!
    agentId: ID!
    agent: Agent
    amount: String!
    amountUnits: String!
    protocol: Protocol!
    endpoint: String!
    timestamp: String!
    solanaExplorer: String!
    status: TransactionStatus!
  }

  "Spec 4.8: the total line of a tree."
  type PaymentTreeTotals {
    amount: String!
    amountUnits: String!
    transactionCount: Int!
    agentCount: Int!
  }

  type PaymentTree {
    rootTxHash: String!
    "Flat, ordered by depth then time; rebuild the tree from parentTxHash."
    nodes: [PaymentTreeNode!]!
    totals: PaymentTreeTotals!
    "True when nodes were left out (nodeLimit reached, or payments below maxDepth)."
    truncated: Boolean!
  }

  type ProtocolSpend {
    protocol: Protocol!
    amount: String!
    amountUnits: String!
    "Share of the total amount in percent, two decimals."
    percent: String!
    txCount: Int!
  }

  type DomainSpend {
    "The endpoint hash when the gateway does not know the domain."
    domain: String!
    amount: String!
    amountUnits: String!
    percent: String!
    txCount: Int!
  }

  type AgentSpend {
    agentId: ID!
    amount: String!
    amountUnits: String!
    percent: String!
    txCount: Int!
  }

  type SpendSummary {
    agentId: ID
    window: String!
    from: String!
    to: String!
    total: String!
    totalUnits: String!
    txCount: Int!
    byProtocol: [ProtocolSpend!]!
    "Largest first; at most 50 domains."
    byDomain: [DomainSpend!]!
    "Largest first (spend tab: by agent)."
    byAgent: [AgentSpend!]!
  }

  type SpendPoint {
    timestamp: String!
    value: String!
    valueUnits: String!
    "The bucket's x402 and MPP volume in base units (protocol tab)."
    x402Units: String!
    mppUnits: String!
  }

  type CountPoint {
    timestamp: String!
    count: Int!
  }

  type ViolationPoint {
    timestamp: String!
    count: Int!
    reason: String!
  }

  "Shares of volume (amount), six decimals; both 0.000000 when nothing was spent."
  type ProtocolSplit {
    x402: String!
    mpp: String!
    x402Units: String!
    mppUnits: String!
  }

  "Spec 4.2 metrics; a series not asked for is null. Buckets start at the window start."
  type MetricSeries {
    spend: [SpendPoint!]
    tx_count: [CountPoint!]
    policy_violations: [ViolationPoint!]
    protocol_split: ProtocolSplit
  }

  type Metrics {
    "Null when the metrics cover every agent of the account."
    agentId: ID
    window: String!
    resolution: String!
    from: String!
    to: String!
    metrics: MetricSeries!
  }

  "One agents.invoke budget (an invocation account on the chain)."
  type SubAgentInvocation {
    invocation: String!
    invokerAgentId: ID
    invokerAddress: String
    "Null when the sub-agent belongs to another account."
    subAgentId: ID
    subAgentAddress: String!
    budget: String!
    budgetUnits: String!
    spent: String!
    spentUnits: String!
    remaining: String!
    remainingUnits: String!
    paymentCount: Int!
  }

  type Invocation {
    parentTxHash: String!
    budget: String!
    budgetUnits: String!
    spent: String!
    spentUnits: String!
    remaining: String!
    remainingUnits: String!
    paymentCount: Int!
    subAgents: [SubAgentInvocation!]!
  }
`;
