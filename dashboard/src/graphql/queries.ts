/**
 * Every GraphQL document the dashboard sends, with the shapes of their answers. The dashboard
 * reads the system only through these (the API's public schema, api/query/schema.ts).
 */

export type Protocol = "x402" | "mpp";
export type TransactionStatus = "confirmed" | "finalized" | "rejected";

export interface TransactionRow {
  readonly id: string;
  readonly txHash: string | null;
  readonly agentId: string;
  readonly protocol: Protocol | null;
  readonly rail: string | null;
  readonly amountPaid: string;
  readonly amountPaidUnits: string;
  readonly endpoint: string;
  readonly domain: string | null;
  readonly parentTxHash: string | null;
  readonly solanaExplorer: string | null;
  readonly timestamp: string;
  readonly depth: number;
  readonly status: TransactionStatus;
  readonly settlementStatus: string | null;
  readonly rejectionCode: string | null;
  readonly rejectionReason: string | null;
  readonly rejectionRequested: string | null;
  readonly rejectionLimit: string | null;
  readonly rejectionUnit: string | null;
  /** The agent's policy version the payment or refusal was decided under; null when unknown. */
  readonly policyVersion: number | null;
  readonly childCount: number;
}

const TRANSACTION_FIELDS = `
  id txHash agentId protocol rail amountPaid amountPaidUnits endpoint domain parentTxHash solanaExplorer
  timestamp depth status settlementStatus rejectionCode rejectionReason rejectionRequested rejectionLimit
  rejectionUnit policyVersion childCount`;

export interface TransactionsData {
  readonly transactions: { readonly nodes: TransactionRow[]; readonly pageInfo: { hasNextPage: boolean; endCursor: string | null } };
}

export interface TransactionsVariables extends Record<string, unknown> {
  agentId?: string | null;
  limit?: number;
  protocol?: Protocol | null;
  domain?: string | null;
  since?: string | null;
  status?: TransactionStatus | null;
  after?: string | null;
}

export const TRANSACTIONS = `
  query Transactions($agentId: ID, $limit: Int, $protocol: Protocol, $domain: String, $since: String, $status: TransactionStatus, $after: String) {
    transactions(agentId: $agentId, limit: $limit, protocol: $protocol, domain: $domain, since: $since, status: $status, after: $after) {
      nodes { ${TRANSACTION_FIELDS} }
      pageInfo { hasNextPage endCursor }
    }
  }`;

export const TRANSACTION_RECORDED = `
  subscription LiveFeed($agentId: ID) {
    transactionRecorded(agentId: $agentId) { ${TRANSACTION_FIELDS} }
  }`;

export interface AgentRow {
  readonly agentId: string;
  readonly name: string;
  readonly walletAddress: string;
  readonly createdAt: string;
  readonly balance: string | null;
  readonly archivedAt: string | null;
}

export interface AgentsData {
  readonly agents: AgentRow[];
}

export interface Share {
  readonly amount: string;
  readonly amountUnits: string;
  readonly percent: string;
  readonly txCount: number;
}

export interface SpendSummaryData {
  readonly spendSummary: {
    readonly window: string;
    readonly from: string;
    readonly to: string;
    readonly total: string;
    readonly totalUnits: string;
    readonly txCount: number;
    readonly byProtocol: (Share & { protocol: Protocol })[];
    readonly byDomain: (Share & { domain: string })[];
    readonly byAgent: (Share & { agentId: string })[];
  };
}

export interface SpendPoint {
  readonly timestamp: string;
  readonly value: string;
  readonly valueUnits: string;
  readonly x402Units: string;
  readonly mppUnits: string;
}

export interface MetricsData {
  readonly metrics: {
    readonly window: string;
    readonly resolution: string;
    readonly from: string;
    readonly to: string;
    readonly metrics: {
      readonly spend: SpendPoint[] | null;
      readonly tx_count: { timestamp: string; count: number }[] | null;
      readonly protocol_split: { x402: string; mpp: string; x402Units: string; mppUnits: string } | null;
    };
  };
}

export interface WindowVariables extends Record<string, unknown> {
  agentId?: string | null;
  window?: string | null;
  range?: { from: string; to: string } | null;
  resolution?: string | null;
}

const SHARE = "amount amountUnits percent txCount";

export const SPEND = `
  query Spend($agentId: ID, $window: String, $range: TimeRangeInput, $resolution: String) {
    spendSummary(agentId: $agentId, window: $window, range: $range) {
      window from to total totalUnits txCount
      byProtocol { protocol ${SHARE} }
      byDomain { domain ${SHARE} }
      byAgent { agentId ${SHARE} }
    }
    metrics(agentId: $agentId, window: $window, range: $range, resolution: $resolution, metrics: ["spend", "tx_count"]) {
      window resolution from to
      metrics { spend { timestamp value valueUnits x402Units mppUnits } tx_count { timestamp count } }
    }
  }`;

export const PROTOCOLS = `
  query Protocols($agentId: ID, $window: String, $range: TimeRangeInput, $resolution: String) {
    metrics(agentId: $agentId, window: $window, range: $range, resolution: $resolution, metrics: ["spend", "protocol_split"]) {
      window resolution from to
      metrics { spend { timestamp value valueUnits x402Units mppUnits } protocol_split { x402 mpp x402Units mppUnits } }
    }
  }`;

export interface PolicyRow {
  readonly agentId: string;
  readonly dailyBudget: string | null;
  readonly dailyBudgetUnits: string | null;
  readonly perCallLimit: string | null;
  readonly allowedDomains: string[] | null;
  readonly blockedDomains: string[];
  readonly rateLimit: { calls: number; window: string } | null;
  readonly protocolPreference: string;
  readonly usedToday: string;
  readonly usedTodayUnits: string;
  readonly budgetState: "open" | "warning" | "exhausted";
  readonly windowResetsAt: string | null;
  readonly rateUsage: { calls: number; limit: number | null; window: string | null };
  readonly updatedAt: string | null;
  /** The payments held for a person (docs/policy.md "Approvals"); null when none. */
  readonly approval: {
    readonly above: string | null;
    readonly domains: string[];
    readonly firstPaymentToDomain: boolean;
    readonly timeout: string;
    readonly onTimeout: string;
  } | null;
  /** Limits per endpoint on top of the agent's own (docs/policy.md "Budgets per endpoint"). */
  readonly endpointBudgets: ReadonlyArray<{
    readonly match: string;
    readonly dailyBudget: string | null;
    readonly perCallLimit: string | null;
    readonly rateLimit: { calls: number; window: string } | null;
  }>;
  /** The policy's current version (0: never set). */
  readonly version: number;
}

export const POLICY_FIELDS = `
  agentId dailyBudget dailyBudgetUnits perCallLimit allowedDomains blockedDomains rateLimit { calls window }
  protocolPreference usedToday usedTodayUnits budgetState windowResetsAt rateUsage { calls limit window } updatedAt
  approval { above domains firstPaymentToDomain timeout onTimeout }
  endpointBudgets { match dailyBudget perCallLimit rateLimit { calls window } } version`;

export interface PoliciesData {
  readonly policies: PolicyRow[];
}

export const POLICIES = `query Policies { policies { ${POLICY_FIELDS} } }`;

export interface TreeNode {
  readonly txHash: string;
  readonly parentTxHash: string | null;
  readonly depth: number;
  readonly agentId: string;
  readonly amount: string;
  readonly amountUnits: string;
  readonly protocol: Protocol;
  readonly endpoint: string;
  readonly timestamp: string;
  readonly solanaExplorer: string;
  readonly status: TransactionStatus;
}

export interface InvocationBudget {
  readonly parentTxHash: string;
  readonly budget: string;
  readonly budgetUnits: string;
  readonly spent: string;
  readonly spentUnits: string;
  readonly remaining: string;
  readonly paymentCount: number;
  readonly subAgents: {
    readonly invocation: string;
    readonly invokerAgentId: string | null;
    readonly subAgentId: string | null;
    readonly subAgentAddress: string;
    readonly budget: string;
    readonly budgetUnits: string;
    readonly spent: string;
    readonly spentUnits: string;
    readonly remaining: string;
    readonly paymentCount: number;
  }[];
}

export interface RunRootData {
  readonly transaction: { readonly txHash: string; readonly runRootTxHash: string | null } | null;
}

export const RUN_ROOT = `query RunRoot($txHash: String!) { transaction(txHash: $txHash) { txHash runRootTxHash } }`;

export interface RunData {
  readonly paymentTree: {
    readonly rootTxHash: string;
    readonly nodes: TreeNode[];
    readonly totals: { amount: string; amountUnits: string; transactionCount: number; agentCount: number };
    readonly truncated: boolean;
  } | null;
}

export const RUN = `
  query Run($rootTxHash: String!) {
    paymentTree(rootTxHash: $rootTxHash, maxDepth: 16, nodeLimit: 500) {
      rootTxHash
      nodes { txHash parentTxHash depth agentId amount amountUnits protocol endpoint timestamp solanaExplorer status }
      totals { amount amountUnits transactionCount agentCount }
      truncated
    }
  }`;

export interface InvocationsData {
  readonly invocations: InvocationBudget[];
}

export const INVOCATIONS = `
  query Invocations($txHashes: [String!]!) {
    invocations(txHashes: $txHashes) {
      parentTxHash budget budgetUnits spent spentUnits remaining paymentCount
      subAgents { invocation invokerAgentId subAgentId subAgentAddress budget budgetUnits spent spentUnits remaining paymentCount }
    }
  }`;

export interface WalletData {
  readonly wallet: { agentId: string; address: string; balance: string | null; network: string };
  readonly policy: PolicyRow;
}

export const AGENT_PAGE = `
  query AgentPage($agentId: ID!) {
    wallet(agentId: $agentId) { agentId address balance network }
    policy(agentId: $agentId) { ${POLICY_FIELDS} }
  }`;

export type ChannelStatus = "opening" | "open" | "closing" | "closed" | "failed";
export type ChannelChargeStatus = "signed" | "accepted" | "settled" | "void";

export interface ChannelRow {
  readonly address: string;
  readonly agentId: string;
  readonly payee: string;
  readonly protocol: Protocol;
  readonly serviceOrigin: string | null;
  readonly status: ChannelStatus;
  readonly onChain: boolean;
  readonly expired: boolean;
  readonly deposit: string;
  readonly accepted: string;
  readonly settled: string;
  readonly acceptedUnsettled: string;
  readonly refunded: string | null;
  readonly settlementCount: number;
  readonly openTx: string | null;
  readonly closeTx: string | null;
  readonly openedAt: string;
  readonly expiresAt: string;
  readonly closedAt: string | null;
}

const CHANNEL_FIELDS = `
  address agentId payee protocol serviceOrigin status onChain expired deposit accepted settled acceptedUnsettled refunded
  settlementCount openTx closeTx openedAt expiresAt closedAt`;

export interface ChannelsData {
  readonly channels: { readonly nodes: ChannelRow[]; readonly pageInfo: { hasNextPage: boolean; endCursor: string | null } };
}

export interface ChannelsVariables extends Record<string, unknown> {
  agentId?: string | null;
  status?: ChannelStatus | null;
  first?: number;
  after?: string | null;
}

export const CHANNELS = `
  query Channels($agentId: ID, $status: ChannelStatus, $first: Int, $after: String) {
    channels(agentId: $agentId, status: $status, first: $first, after: $after) {
      nodes { ${CHANNEL_FIELDS} }
      pageInfo { hasNextPage endCursor }
    }
  }`;

export interface ChannelChargeRow {
  readonly paymentId: string;
  readonly sequence: string | null;
  readonly amount: string;
  readonly cumulative: string | null;
  readonly endpoint: string;
  readonly status: ChannelChargeStatus;
  readonly settlementTx: string | null;
  readonly chainStatus: "confirmed" | "finalized" | null;
  readonly solanaExplorer: string | null;
  readonly signedAt: string | null;
  readonly acceptedAt: string | null;
  readonly settledAt: string | null;
}

export interface ChannelSettlementRow {
  readonly txHash: string;
  readonly cumulative: string;
  readonly delta: string;
  readonly sequence: string;
  readonly chargeCount: number;
  readonly timestamp: string | null;
  readonly status: "confirmed" | "finalized";
}

export interface ChannelData {
  readonly channel:
    | (ChannelRow & {
        readonly payer: string;
        readonly signed: string;
        readonly withdrawDelaySeconds: number;
        readonly refundableAt: string | null;
        readonly forced: boolean;
        readonly settlements: ChannelSettlementRow[];
        readonly charges: {
          readonly nodes: ChannelChargeRow[];
          readonly pageInfo: { hasNextPage: boolean; endCursor: string | null };
        };
      })
    | null;
}

export const CHANNEL = `
  query Channel($address: String!, $first: Int, $after: String) {
    channel(address: $address) {
      ${CHANNEL_FIELDS} payer signed withdrawDelaySeconds refundableAt forced
      settlements(first: 100) { txHash cumulative delta sequence chargeCount timestamp status }
      charges(first: $first, after: $after) {
        nodes { paymentId sequence amount cumulative endpoint status settlementTx chainStatus solanaExplorer signedAt acceptedAt settledAt }
        pageInfo { hasNextPage endCursor }
      }
    }
  }`;

export const CHANNEL_UPDATED = `
  subscription ChannelUpdated {
    channelUpdated { event txHash channel { address } }
  }`;

export interface AgentListData {
  readonly agentList: { readonly nodes: AgentRow[]; readonly totalCount: number };
}

export interface AgentListVariables extends Record<string, unknown> {
  search?: string | null;
  first?: number;
  offset?: number;
}

/** The agent picker's options: ids only, no balance (no chain read). */
export const AGENT_OPTIONS = `
  query AgentOptions($search: String, $first: Int) {
    agentList(search: $search, includeArchived: true, first: $first) { nodes { agentId archivedAt } totalCount }
  }`;

export const AGENT_LIST = `
  query AgentList($search: String, $first: Int, $offset: Int) {
    agentList(search: $search, includeArchived: true, first: $first, offset: $offset) {
      nodes { agentId name walletAddress createdAt balance archivedAt }
      totalCount
    }
  }`;

export type BudgetStateName = "open" | "warning" | "exhausted";

export interface BudgetUseRow {
  readonly agentId: string;
  readonly dailyBudget: string;
  readonly dailyBudgetUnits: string;
  readonly usedToday: string;
  readonly usedTodayUnits: string;
  readonly percent: string;
  readonly budgetState: BudgetStateName;
  readonly windowResetsAt: string | null;
}

export interface BudgetUseData {
  readonly budgetUse: {
    readonly nodes: BudgetUseRow[];
    readonly totalCount: number;
    readonly warningCount: number;
    readonly exhaustedCount: number;
  };
}

export interface BudgetUseVariables extends Record<string, unknown> {
  state?: BudgetStateName | null;
  order?: "use" | "agent";
  first?: number;
  offset?: number;
}

export const BUDGET_USE = `
  query BudgetUse($state: BudgetState, $order: BudgetOrder, $first: Int, $offset: Int) {
    budgetUse(state: $state, order: $order, first: $first, offset: $offset) {
      nodes { agentId dailyBudget dailyBudgetUnits usedToday usedTodayUnits percent budgetState windowResetsAt }
      totalCount warningCount exhaustedCount
    }
  }`;

export interface RejectionsVariables extends Record<string, unknown> {
  agentId?: string | null;
  reason?: string | null;
  domain?: string | null;
  limit?: number;
  after?: string | null;
}

export const REJECTIONS = `
  query Rejections($agentId: ID, $reason: String, $domain: String, $limit: Int, $after: String) {
    transactions(agentId: $agentId, status: rejected, reason: $reason, domain: $domain, limit: $limit, after: $after) {
      nodes { ${TRANSACTION_FIELDS} }
      pageInfo { hasNextPage endCursor }
    }
  }`;

export interface RunListRow {
  readonly rootTxHash: string;
  readonly agentId: string;
  readonly timestamp: string;
  readonly total: string;
  readonly totalUnits: string;
  readonly paymentCount: number;
  readonly agentCount: number;
  readonly budget: string | null;
  readonly budgetUnits: string | null;
  readonly budgetSpent: string | null;
  readonly budgetSpentUnits: string | null;
}

export interface RunsData {
  readonly runs: { readonly nodes: RunListRow[]; readonly totalCount: number };
}

export interface RunsVariables extends Record<string, unknown> {
  agentId?: string | null;
  order?: "recent" | "cost";
  first?: number;
  offset?: number;
}

export const RUNS = `
  query Runs($agentId: ID, $order: RunOrder, $first: Int, $offset: Int) {
    runs(agentId: $agentId, order: $order, first: $first, offset: $offset) {
      nodes { rootTxHash agentId timestamp total totalUnits paymentCount agentCount budget budgetUnits budgetSpent budgetSpentUnits }
      totalCount
    }
  }`;

export interface DaySpend {
  readonly from: string;
  readonly to: string;
  readonly total: string;
  readonly totalUnits: string;
  readonly txCount: number;
}

export interface OverviewData {
  readonly today: DaySpend;
  readonly yesterday: DaySpend;
  readonly budgetUse: BudgetUseData["budgetUse"];
  readonly rejectionCounts: { reasonCode: string; count: number }[];
  readonly webhookHealth: { since: string; failed: number; retrying: number; lastError: string | null };
  readonly indexerStatus: { slot: string; checkpointAt: string; secondsSinceCheckpoint: number; latestPaymentAt: string | null } | null;
}

export interface OverviewVariables extends Record<string, unknown> {
  today: { from: string; to: string };
  yesterday: { from: string; to: string };
}

/** The overview's one request: today against yesterday by the same time, and what needs attention. */
export const OVERVIEW = `
  query Overview($today: TimeRangeInput!, $yesterday: TimeRangeInput!) {
    today: spendSummary(range: $today) { from to total totalUnits txCount }
    yesterday: spendSummary(range: $yesterday) { from to total totalUnits txCount }
    budgetUse(order: use, first: 5) {
      nodes { agentId dailyBudget dailyBudgetUnits usedToday usedTodayUnits percent budgetState windowResetsAt }
      totalCount warningCount exhaustedCount
    }
    rejectionCounts(since: "1h") { reasonCode count }
    webhookHealth(since: "24h") { since failed retrying lastError }
    indexerStatus { slot checkpointAt secondsSinceCheckpoint latestPaymentAt }
  }`;

export interface ActivityData {
  readonly metrics: {
    readonly from: string;
    readonly to: string;
    readonly metrics: { readonly tx_count: { timestamp: string; count: number }[] | null };
  };
}

/** Hourly payment counts over the last 30 days: where the account's activity starts (chart windows adapt to it). */
export const ACTIVITY = `
  query Activity($agentId: ID) {
    metrics(agentId: $agentId, window: "30d", resolution: "1h", metrics: ["tx_count"]) { from to metrics { tx_count { timestamp count } } }
  }`;

export type ApprovalStatusName = "pending" | "approved" | "denied" | "expired";

export interface ApprovalRow {
  readonly id: string;
  readonly agentId: string;
  readonly amount: string;
  readonly amountUnits: string;
  readonly endpoint: string;
  readonly domain: string;
  readonly rule: string;
  readonly reason: string;
  readonly status: ApprovalStatusName;
  readonly requestedAt: string;
  readonly expiresAt: string;
  readonly decidedAt: string | null;
  readonly decidedBy: string | null;
  readonly note: string | null;
  readonly outcome: string | null;
}

export interface ApprovalsData {
  readonly approvals: { readonly nodes: ApprovalRow[]; readonly pageInfo: { hasNextPage: boolean; endCursor: string | null } };
}

export interface ApprovalsVariables extends Record<string, unknown> {
  status?: ApprovalStatusName | null;
  first?: number;
  after?: string | null;
}

/** Held payments of the account, newest first (admin and approver sessions). */
export const APPROVALS = `
  query Approvals($status: ApprovalStatus, $first: Int, $after: String) {
    approvals(status: $status, first: $first, after: $after) {
      nodes {
        id agentId amount amountUnits endpoint domain rule reason status
        requestedAt expiresAt decidedAt decidedBy note outcome
      }
      pageInfo { hasNextPage endCursor }
    }
  }`;

/** What a candidate policy would have done to one recorded attempt (`Query.simulatePolicy`). */
export type SimulatedOutcome = "pass" | "refuse" | "needs_approval";

export interface SimulationCount {
  readonly count: number;
  readonly amount: string;
  readonly amountUnits: string;
}

export interface SimulatedPaymentRow {
  readonly id: string;
  readonly at: string;
  readonly endpoint: string;
  readonly domain: string;
  readonly amount: string;
  readonly recorded: SimulatedOutcome;
  readonly outcome: SimulatedOutcome;
  readonly rule: string | null;
  readonly reason: string | null;
}

export interface PolicySimulationData {
  readonly simulatePolicy: {
    readonly from: string;
    readonly to: string;
    readonly truncated: boolean;
    readonly totals: {
      readonly attempts: number;
      readonly changed: number;
      readonly passed: SimulationCount;
      readonly refused: SimulationCount;
      readonly needsApproval: SimulationCount;
      readonly refusedByRule: readonly (SimulationCount & { readonly rule: string })[];
      readonly refusedByDomain: readonly (SimulationCount & { readonly domain: string })[];
    };
    readonly payments: readonly SimulatedPaymentRow[];
  };
}

export interface PolicySimulationVariables {
  [key: string]: unknown;
  agentId: string;
  policy: string;
  window: string;
  limit: number;
}

export const SIMULATE_POLICY = `
  query SimulatePolicy($agentId: ID!, $policy: String!, $window: String!, $limit: Int) {
    simulatePolicy(agentId: $agentId, policy: $policy, window: $window, limit: $limit) {
      from to truncated
      totals {
        attempts changed
        passed { count amount amountUnits } refused { count amount amountUnits } needsApproval { count amount amountUnits }
        refusedByRule { rule count amount amountUnits } refusedByDomain { domain count amount amountUnits }
      }
      payments { id at endpoint domain amount recorded outcome rule reason }
    }
  }`;
