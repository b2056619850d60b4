/**
 * Sign-in with an API key of the account. The key is exchanged once for a session cookie
 * (session.ts) and then dropped from the page's state; the field is a password field, so the
 * browser neither shows nor autocompletes it.
 */
import { type FormEvent, type ReactNode, useId, useState } from "react";
import { signIn } from "../session";

export function SignInView({ message }: { message: string | null }): ReactNode {
  const id = useId();
  const [key, setKey] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event: FormEvent): Promise<void> => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    const failure = await signIn(key);
    setKey("");
    setBusy(false);
    setError(failure);
  };
  return (
    <main id="main" className="sign-in">
      <h1>Agent Payment Gateway</h1>
      <p className="lede">Sign in with an API key of your account to see its payments, spend, policies and runs.</p>
      {message !== null ? (
        <p className="notice" role="status" data-testid="signed-out-message">
          {message}
        </p>
      ) : null}
      <form onSubmit={submit} aria-describedby={`${id}-help`}>
        <label htmlFor={id}>API key</label>
        <input
          id={id}
          name="api-key"
          type="password"
          autoComplete="off"
          spellCheck={false}
          required
          value={key}
          onChange={(event) => setKey(event.target.value)}
          placeholder="apg_…"
        />
        <p id={`${id}-help`} className="muted">
          The key is sent once to this server, which answers with a session cookie; the page does not keep the key. Revoking the key ends
          the session.
        </p>
        <button type="submit" disabled={busy || key.trim() === ""}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
        {error !== null ? (
          <p className="error" role="alert" data-testid="sign-in-error">
            {error}
          </p>
        ) : null}
      </form>
    </main>
  );
}
