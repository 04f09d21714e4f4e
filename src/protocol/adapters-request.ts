import { z } from "zod";

/** The form of `POST /v1/adapters` (multipart/form-data), as the OpenAPI document shows it: the PEFT pair or one GGUF LoRA. */
export const uploadAdapterForm = z.object({
  base_model: z
    .string()
    .meta({ description: "The catalog model (id or alias) the adapter was trained on; served here on the local engine." }),
  name: z.string().meta({ description: "1-64 letters, digits, '.', '_' or '-': the adapter's model id is `<account name>/<name>`." }),
  adapter_config: z.string().optional().meta({ format: "binary", description: "PEFT's adapter_config.json." }),
  adapter_model: z.string().optional().meta({ format: "binary", description: "PEFT's adapter_model.safetensors (F32, F16 or BF16)." }),
  adapter_gguf: z
    .string()
    .optional()
    .meta({ format: "binary", description: "Instead of the PEFT pair: a GGUF LoRA (llama.cpp's convert_lora_to_gguf.py output)." }),
});
