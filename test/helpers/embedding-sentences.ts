/**
 * The fidelity set for embedding formats: 72 texts against the numpy reference, short and long (up
 * to ~500 tokens), prose, questions, code, numbers, accents and emoji, and near-paraphrase pairs whose
 * similarities a retrieval user ranks by (a format must keep their order: Spearman over every pair).
 */
const repeat = (count: number, line: (i: number) => string) => Array.from({ length: count }, (_, i) => line(i + 1)).join(" ");

const SHORT = [
  "The quick brown fox jumps over the lazy dog.",
  "Crème brûlée, naïve café, Ångström and façade: accents are stripped as BERT does.",
  "I love pizza 🍕 and rockets 🚀!!! (really) #yes",
  "word",
  "A man is eating food.",
  "A man is eating a piece of bread.",
  "A man is riding a horse.",
  "A woman is playing the violin.",
  "A woman plays a violin on stage.",
  "Two dogs are running through a snowy field.",
  "A cat sleeps on a warm windowsill.",
  "The stock market fell sharply after the announcement.",
  "Shares dropped quickly once the news was released.",
  "How do I reset my password?",
  "What are the steps to change my account password?",
  "Where is the nearest train station?",
  "The meeting has been moved to Thursday at 3 pm.",
  "Our quarterly revenue grew by 12.5% year over year.",
  "Photosynthesis converts light energy into chemical energy.",
  "Plants turn sunlight into sugar through photosynthesis.",
  "The mitochondria is the powerhouse of the cell.",
  "Water boils at 100 degrees Celsius at sea level.",
  "def add(a, b): return a + b",
  "function add(a: number, b: number): number { return a + b; }",
  "SELECT name, email FROM users WHERE active = true ORDER BY name;",
  "git rebase -i HEAD~3",
  "Error: ENOENT: no such file or directory, open '/etc/app/config.json'",
  "The patient reported mild headaches and occasional dizziness.",
  "Symptoms included a light headache and some dizziness.",
  "The contract terminates automatically on 31 December 2027.",
  "Please find the invoice attached to this email.",
  "Le chat est sur la table.",
  "Der schnelle braune Fuchs springt über den faulen Hund.",
  "El niño comió una manzana roja.",
  "東京は日本の首都です。",
  "Москва — столица России.",
  "3.14159 26535 89793 23846",
  "HTTP 429 Too Many Requests: retry after 20 seconds.",
  "The battery lasts about ten hours on a single charge.",
  "Battery life is roughly ten hours per charge.",
  "The film was long, slow and ultimately disappointing.",
  "I thought the movie was fantastic from start to finish.",
  "Vectors close in embedding space share meaning.",
  "Retrieval-augmented generation grounds answers in documents.",
  "A recipe: whisk two eggs, add flour, then fry in butter.",
  "Mix the eggs with flour and cook the batter in a hot pan.",
  "The spacecraft entered orbit around Mars after seven months.",
  "After a seven-month journey the probe reached Martian orbit.",
  "Keep your API keys out of version control.",
  "Never commit secrets such as tokens to a git repository.",
  "The library closes early on public holidays.",
  "On bank holidays the library shuts its doors sooner.",
  "Quantum computers use qubits that can be in superposition.",
  "He scored the winning goal in the final minute.",
  "The museum's new wing displays modern sculpture.",
  "Traffic was heavy on the highway this morning.",
  "Is it going to rain tomorrow afternoon?",
  "The weather forecast predicts showers tomorrow after lunch.",
  "ok",
  "???",
  "[CLS] looks like a special token but is plain text here",
  "Supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopic",
  "The rain in Spain stays mainly in the plain.",
  "Rust's borrow checker prevents data races at compile time.",
];

const LONG = [
  repeat(18, (i) => `Sentence ${i} of a long paragraph talks about retrieval, ranking and vectors.`),
  repeat(
    12,
    (i) =>
      `In chapter ${i}, the travellers crossed another river, counted their supplies, argued about the map and slept under a sky full of unfamiliar stars.`,
  ),
  repeat(
    10,
    (i) =>
      `Step ${i}: open the settings panel, choose the network tab, enable the proxy, enter host 10.0.${i}.1 and port 80${i}, then save and restart the client.`,
  ),
  repeat(10, (i) => `for (let i${i} = 0; i${i} < items.length; i${i}++) { total += items[i${i}].price * items[i${i}].quantity; }`),
  repeat(
    9,
    (i) =>
      `Clause ${i}. The supplier shall deliver the goods described in Schedule ${i} within thirty days, failing which the buyer may terminate this agreement without penalty.`,
  ),
  repeat(16, (i) => `Note ${i}: café, naïve, jalapeño, Zürich, São Paulo and Kraków all carry marks that the tokenizer strips.`),
  repeat(20, (i) => `Measurement ${i} read ${(i * 1.75).toFixed(2)} volts at ${20 + i} degrees.`),
];

export const FIDELITY_SENTENCES: string[] = [...SHORT, ...LONG];
/** Where the long texts start in FIDELITY_SENTENCES. */
export const FIRST_LONG = SHORT.length;

/** Spearman's rank correlation: the Pearson correlation of the ranks (ties take their average rank). */
export function spearman(a: number[], b: number[]): number {
  const ra = ranks(a);
  const rb = ranks(b);
  const mean = (ra.length + 1) / 2;
  let num = 0;
  let da = 0;
  let db = 0;
  for (let i = 0; i < ra.length; i++) {
    num += (ra[i]! - mean) * (rb[i]! - mean);
    da += (ra[i]! - mean) ** 2;
    db += (rb[i]! - mean) ** 2;
  }
  return num / Math.sqrt(da * db);
}

function ranks(values: number[]): number[] {
  const order = values.map((value, index) => ({ value, index })).sort((x, y) => x.value - y.value);
  const out = new Array<number>(values.length);
  for (let start = 0; start < order.length;) {
    let end = start;
    while (end + 1 < order.length && order[end + 1]!.value === order[start]!.value) end++;
    for (let k = start; k <= end; k++) out[order[k]!.index] = (start + end) / 2 + 1;
    start = end + 1;
  }
  return out;
}

/** Every pair's cosine, i < j, in a fixed order. */
export function pairwiseSimilarities(vectors: number[][], cosine: (a: number[], b: number[]) => number): number[] {
  const out: number[] = [];
  for (let i = 0; i < vectors.length; i++) for (let j = i + 1; j < vectors.length; j++) out.push(cosine(vectors[i]!, vectors[j]!));
  return out;
}
