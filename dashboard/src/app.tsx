/** The application shell: the sign-in gate, the header with the account and sign-out, the views' navigation. */
import { type ReactNode, useMemo } from "react";
import { Provider } from "urql";
import { Link } from "./components/link";
import { createGraphqlClient } from "./graphql/client";
import { type Route, href, useLocation } from "./router";
import { type SessionInfo, signOut, useSession } from "./session";
import { AgentsView, AgentView } from "./views/agents";
import { ApprovalsView } from "./views/approvals";
import { ChannelsView, ChannelView } from "./views/channels";
import { LedgerView } from "./views/ledger";
import { LiveFeedView } from "./views/live-feed";
import { OverviewView } from "./views/overview";
import { PoliciesView } from "./views/policies";
import { ProtocolsView } from "./views/protocols";
import { RunsView } from "./views/runs";
import { SignInView } from "./views/sign-in";
import { SpendView } from "./views/spend";

const NAV: readonly { view: Route["view"]; path: string; label: string }[] = [
  { view: "overview", path: "overview", label: "Overview" },
  { view: "live", path: "live", label: "Live feed" },
  { view: "spend", path: "spend", label: "Spend" },
  { view: "protocols", path: "protocols", label: "Protocols" },
  { view: "policies", path: "policies", label: "Policies" },
  { view: "approvals", path: "approvals", label: "Approvals" },
  { view: "ledger", path: "ledger", label: "Ledger" },
  { view: "runs", path: "runs", label: "Runs" },
  { view: "channels", path: "channels", label: "Channels" },
  { view: "agents", path: "agents", label: "Agents" },
];

function View({ route, params }: { route: Route; params: URLSearchParams }): ReactNode {
  switch (route.view) {
    case "overview":
      return <OverviewView />;
    case "live":
      return <LiveFeedView params={params} />;
    case "spend":
      return <SpendView params={params} />;
    case "protocols":
      return <ProtocolsView params={params} />;
    case "policies":
      return <PoliciesView params={params} />;
    case "ledger":
      return <LedgerView params={params} />;
    case "runs":
      return <RunsView txHash={route.txHash} params={params} />;
    case "channels":
      return <ChannelsView params={params} />;
    case "channel":
      return <ChannelView address={route.address} />;
    case "agents":
      return <AgentsView params={params} />;
    case "agent":
      return <AgentView agentId={route.agentId} />;
    case "approvals":
      return <ApprovalsView />;
    case "not-found":
      return (
        <section aria-labelledby="view-title">
          <h1 id="view-title">Not found</h1>
          <p>
            There is no such page. <Link to={href("overview")}>Go to the overview</Link>.
          </p>
        </section>
      );
  }
}

function Shell({ session, apiReachable }: { session: SessionInfo; apiReachable: boolean }): ReactNode {
  const { route, params } = useLocation();
  const active = route.view === "agent" ? "agents" : route.view === "channel" ? "channels" : route.view;
  return (
    <>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="top">
        <span className="brand">Agent Payment Gateway</span>
        <nav aria-label="Views">
          <ul>
            {NAV.map((item) => (
              <li key={item.view}>
                <Link to={href(item.path)} aria-current={active === item.view ? "page" : undefined}>
                  {item.label}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <div className="account" data-testid="account">
          <span title={`account ${session.accountId}, signed in with key ${session.keyPrefix}… (scope ${session.scope})`}>
            {session.accountName || "account"} · <code>{session.keyPrefix}…</code>
          </span>
          <button type="button" onClick={() => void signOut()}>
            Sign out
          </button>
        </div>
      </header>
      {!apiReachable ? (
        <p className="banner" role="alert">
          The API cannot be reached right now; what is shown may be out of date. Retrying…
        </p>
      ) : null}
      <main id="main" tabIndex={-1}>
        <View
          key={`${route.view}:${route.view === "runs" ? route.txHash : route.view === "channel" ? route.address : ""}`}
          route={route}
          params={params}
        />
      </main>
      <footer className="foot muted">Times in your zone (hover for UTC). Amounts in USDC, exact.</footer>
    </>
  );
}

export function App(): ReactNode {
  const session = useSession();
  if (session.status === "checking") {
    return (
      <main id="main">
        <p className="state" role="status">
          Checking your session…
        </p>
      </main>
    );
  }
  if (session.status === "unreachable") {
    return (
      <main id="main" className="sign-in">
        <h1>Agent Payment Gateway</h1>
        <p className="error" role="alert" data-testid="api-unreachable">
          {session.message}
        </p>
        <p className="muted">Retrying every few seconds.</p>
      </main>
    );
  }
  if (session.status === "signed-out") return <SignInView message={session.message} />;
  return <SignedIn session={session.session} apiReachable={session.apiReachable} />;
}

/** One GraphQL client (and cache) per sign-in. */
function SignedIn({ session, apiReachable }: { session: SessionInfo; apiReachable: boolean }): ReactNode {
  // biome-ignore lint/correctness/useExhaustiveDependencies: a new sign-in (account, key or expiry) gets a new client.
  const client = useMemo(() => createGraphqlClient(), [session.accountId, session.keyPrefix, session.expiresAt]);
  return (
    <Provider value={client}>
      <Shell session={session} apiReachable={apiReachable} />
    </Provider>
  );
}
