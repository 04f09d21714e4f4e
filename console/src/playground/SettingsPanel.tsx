import type { WireModel } from "../wire.js";
import type { Settings } from "./request.js";

/** The request's controls; every field maps to one chat parameter. */
export function SettingsPanel({
  settings,
  models,
  onChange,
}: {
  settings: Settings;
  models: WireModel[];
  onChange: (s: Settings) => void;
}) {
  const set =
    <K extends keyof Settings>(name: K) =>
    (event: Event) =>
      onChange({ ...settings, [name]: (event.target as HTMLInputElement).value });
  const model = models.find((m) => m.id === settings.model);
  const jsonCapable = model?.metadata.tags.includes("JSON") ?? true;
  return (
    <aside class="card settings">
      <label>
        Model
        <select value={settings.model} onChange={set("model")} name="model">
          {models.map((m) => (
            <option key={m.id} value={m.id}>
              {m.id}
              {m.metadata.status === "ready" ? "" : ` (${m.metadata.status})`}
            </option>
          ))}
        </select>
      </label>
      <label>
        System message
        <textarea rows={3} value={settings.system} onInput={set("system")} name="system" placeholder="You are a helpful assistant." />
      </label>
      <div class="row2">
        <label>
          Temperature
          <input type="number" min="0" max="2" step="0.1" value={settings.temperature} onInput={set("temperature")} name="temperature" />
        </label>
        <label>
          top_p
          <input type="number" min="0" max="1" step="0.05" value={settings.topP} onInput={set("topP")} name="top_p" />
        </label>
        <label>
          max_tokens
          <input type="number" min="1" step="1" value={settings.maxTokens} onInput={set("maxTokens")} name="max_tokens" />
        </label>
        <label>
          Seed
          <input type="number" step="1" value={settings.seed} onInput={set("seed")} name="seed" placeholder="random" />
        </label>
      </div>
      <label>
        Stop sequences <span class="muted small">(one per line)</span>
        <textarea rows={2} value={settings.stop} onInput={set("stop")} name="stop" />
      </label>
      <label>
        Service tier
        <select value={settings.tier} onChange={set("tier")} name="service_tier">
          <option value="auto">auto</option>
          <option value="default">default</option>
          <option value="priority">priority</option>
          <option value="flex">flex</option>
        </select>
      </label>
      <label>
        JSON mode
        <select value={settings.jsonMode} onChange={set("jsonMode")} name="json_mode">
          <option value="off">off</option>
          <option value="json_object">JSON object</option>
          <option value="json_schema">JSON schema</option>
        </select>
      </label>
      {settings.jsonMode !== "off" && !jsonCapable ? <p class="warn small">This model is not tagged JSON; the API will refuse.</p> : null}
      <label>
        Prediction <span class="muted small">(Predicted Outputs: the text you expect back, e.g. the file before your edit)</span>
        <textarea rows={4} class="mono" value={settings.prediction} onInput={set("prediction")} name="prediction" spellcheck={false} />
      </label>
      {settings.jsonMode === "json_schema" ? (
        <label>
          Schema
          <textarea rows={7} class="mono" value={settings.schema} onInput={set("schema")} name="schema" spellcheck={false} />
        </label>
      ) : null}
    </aside>
  );
}
