import { ms } from "../format.js";
import type { Turn } from "./request.js";
import type { AnswerStats } from "./stream.js";

export interface Message extends Turn {
  stats?: AnswerStats;
  streaming?: boolean;
}

interface Props {
  message: Message;
  busy: boolean;
  /** The text being edited, when this (user) message is. */
  editing: string | null;
  /** A text starts or updates an edit; null cancels it. */
  onEdit: (text: string | null) => void;
  onSaveEdit: () => void;
  onRegenerate: () => void;
}

/** One turn of the conversation: its text (streaming in under a cursor), its figures, its actions. */
export function MessageItem({ message, busy, editing, onEdit, onSaveEdit, onRegenerate }: Props) {
  return (
    <li class={`message message-${message.role}`} data-role={message.role}>
      <div class="message-role">{message.role}</div>
      {editing !== null ? (
        <div class="edit">
          <textarea value={editing} onInput={(e) => onEdit((e.target as HTMLTextAreaElement).value)} rows={3} />
          <div class="actions">
            <button type="button" class="primary" onClick={onSaveEdit}>
              Save &amp; resend
            </button>
            <button type="button" onClick={() => onEdit(null)}>
              Cancel
            </button>
          </div>
        </div>
      ) : (
        <pre class="message-text">
          {message.content}
          {message.streaming ? <span class="cursor">▍</span> : null}
        </pre>
      )}
      <div class="message-foot">
        {message.stats ? <Stats stats={message.stats} /> : null}
        {message.role === "user" && !busy && editing === null ? (
          <button type="button" class="link" onClick={() => onEdit(message.content)}>
            Edit
          </button>
        ) : null}
        {message.role === "assistant" && !busy ? (
          <button type="button" class="link" onClick={onRegenerate}>
            Regenerate
          </button>
        ) : null}
      </div>
    </li>
  );
}

function Stats({ stats }: { stats: AnswerStats }) {
  const usage = stats.usage;
  return (
    <dl class="stats" data-testid="answer-stats">
      <dt>prompt</dt>
      <dd data-stat="prompt">{usage?.prompt_tokens ?? "–"}</dd>
      <dt>cached</dt>
      <dd data-stat="cached">{usage?.prompt_tokens_details?.cached_tokens ?? 0}</dd>
      <dt>completion</dt>
      <dd data-stat="completion">{usage?.completion_tokens ?? "–"}</dd>
      {usage?.completion_tokens_details?.accepted_prediction_tokens || usage?.completion_tokens_details?.rejected_prediction_tokens ? (
        <>
          <dt>prediction</dt>
          <dd data-stat="prediction">
            {usage.completion_tokens_details.accepted_prediction_tokens ?? 0} accepted,{" "}
            {usage.completion_tokens_details.rejected_prediction_tokens ?? 0} rejected
          </dd>
        </>
      ) : null}
      <dt>cost</dt>
      <dd data-stat="cost">{usage?.estimated_cost !== undefined ? `$${String(usage.estimated_cost)}` : "–"}</dd>
      <dt>TTFT</dt>
      <dd data-stat="ttft">{ms(stats.ttftMs)}</dd>
      <dt>speed</dt>
      <dd data-stat="tps">{stats.tokensPerSecond === null ? "–" : `${stats.tokensPerSecond.toFixed(1)} tok/s`}</dd>
      {stats.serviceTier ? (
        <>
          <dt>tier</dt>
          <dd>{stats.serviceTier}</dd>
        </>
      ) : null}
      {stats.finishReason ? (
        <>
          <dt>finish</dt>
          <dd>{stats.finishReason}</dd>
        </>
      ) : null}
    </dl>
  );
}
