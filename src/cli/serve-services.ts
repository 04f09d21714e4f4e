import { join } from "node:path";
import type { Settings } from "../config/settings.js";
import { createCompletionStore } from "../api/chat/completion-store.js";
import { createOperations } from "../api/registry.js";
import { createResponseStore } from "../api/responses/response-store.js";
import { createBackgroundResponses, type BackgroundDeps } from "../api/responses/background.js";
import { createBackgroundStore } from "../api/responses/background-store.js";
import { createSpendBudgets } from "../billing/budgets.js";
import { createUsageLedger } from "../billing/ledger.js";
import { openLedgerJournal, type LedgerJournal } from "../billing/ledger-journal.js";
import { createChatService } from "../serving/chat-service.js";
import { createEmbeddingService } from "../serving/embedding-service.js";
import { createTokenService } from "../serving/token-service.js";
import type { Database } from "../storage/database.js";
import { logLevel } from "../config/environment.js";

/** What serves the API: the lifecycle's services, the stores of stored objects, and the operations both the routes and batch lines run. */
export function servingServices(
  settings: Settings,
  deps: Omit<Parameters<typeof createChatService>[0], "ledger" | "budgets"> & {
    db: Database;
    /** This process and its drain, where background responses run; absent: `background: true` is refused. */
    background?: Pick<BackgroundDeps, "ownerId" | "runAsServer">;
    /** Where rows that are their request's only bill go before the database (billing/ledger-journal.ts). */
    journal?: LedgerJournal;
  },
) {
  const servingDeps = { ...deps, ledger: createUsageLedger(deps.db, deps.journal), budgets: createSpendBudgets(deps.db) };
  const chat = createChatService(servingDeps);
  const embeddings = createEmbeddingService(servingDeps);
  const responses = createResponseStore(deps.db, settings.storedObjects);
  const completions = createCompletionStore(deps.db, settings.storedObjects);
  const background =
    deps.background &&
    createBackgroundResponses({
      ...deps.background,
      chat,
      responses,
      store: createBackgroundStore(deps.db),
      maxUnfinished: settings.backgroundResponsesPerAccount,
    });
  return {
    ledger: servingDeps.ledger,
    chat,
    embeddings,
    tokens: createTokenService(servingDeps),
    responses,
    completions,
    ...(background ? { background } : {}),
    operations: createOperations({ chat, embeddings, responses, completions, ...(background ? { background } : {}) }),
  };
}

/** The edge's limits every server takes from the settings, the worker too: body size and depth, connections, logging. */
export function edgeOptions(settings: Settings) {
  return {
    bodyLimit: settings.bodyLimit,
    maxJsonDepth: settings.maxJsonDepth,
    connections: {
      requestTimeoutMs: settings.requestTimeoutMs,
      maxUnauthenticatedPerIp: settings.maxUnauthenticatedPerIp,
      streamBufferBytes: settings.streamBufferBytes,
      streamPauseTimeoutMs: settings.streamPauseTimeoutMs,
    },
    logger: { level: logLevel() ?? "info" },
    accessLog: settings.accessLog,
    compression: settings.compression,
  };
}

/** The ledger's write-ahead journal in the data dir (billing/ledger-journal.ts). */
const LEDGER_JOURNAL_FILE = "ledger-journal.jsonl";

/** The serving services on a ledger with its journal, the rows a stopped process answered for and had not yet written billed first. */
export async function journaledServices(
  settings: Settings,
  deps: Omit<Parameters<typeof servingServices>[1], "journal">,
  dataDir: string,
  log: (message: string) => void,
) {
  const journal = openLedgerJournal(join(dataDir, LEDGER_JOURNAL_FILE));
  const services = servingServices(settings, { ...deps, journal });
  const replayed = await services.ledger.replay();
  if (replayed > 0) log(`wrote ${replayed} ledger row(s) a stopped server process had answered for (${LEDGER_JOURNAL_FILE})`);
  return services;
}
