// Types of the rlx npm package (contract: API.md).

export type DType = "f32" | "f64" | "f16" | "bf16" | "i64" | "i32" | "i16" | "i8" | "u8" | "bool" | "c64" | (string & {});
export type DeviceName = "cpu" | "webgpu";
export type Policy = "prefer_native" | "common_ir_only" | "native_only";
export type TypedArray =
  | Float32Array | Float64Array | Int32Array | BigInt64Array | Int16Array | Int8Array | Uint8Array | Uint16Array;
export type AttrValue = boolean | number | string | number[] | unknown;
export type ErrorCode =
  | "init" | "invalid_argument" | "shape" | "dtype" | "disposed" | "input" | "unsupported" | "parse" | "graph" | "limit"
  | "dispatch" | "device" | "device_lost" | "format" | "runtime" | "tokenizer" | "internal" | "panic";
/** Every code an RlxError can carry (npm/API.md#errors says when each is used). */
export const ERROR_CODES: readonly ErrorCode[];

/** Every failure of the package. `message` is the Rust error's text. */
export class RlxError extends Error {
  readonly name: "RlxError";
  readonly code: ErrorCode;
}

export interface InitOptions {
  /** The .wasm module: bytes, a URL, or a Response (default: next to this package's JS). */
  wasm?: BufferSource | URL | string | Response;
  /**
   * `rlx` only. Default: the relaxed-SIMD core where the engine runs relaxed
   * SIMD, else the plain simd128 one. `false` forces the plain core; `true`
   * requires the relaxed one (RlxError 'init' where the engine lacks it).
   * Ignored when `wasm` is given.
   */
  relaxed?: boolean;
  /**
   * `rlx` only: the CPU engine's threads. Default: in a cross-origin
   * isolated page (COOP/COEP headers) the threaded core with one thread per
   * core (`navigator.hardwareConcurrency`, at most 16), else the
   * single-threaded core. `1` forces the single-threaded core; `n > 1`
   * requires the threaded one (RlxError 'init' naming why where the page
   * cannot load it).
   */
  threads?: number;
}
export function init(opts?: InitOptions): Promise<void>;
/** What init() loaded: the threaded or single-threaded core, the CPU engine's threads, and why. */
export interface Threading {
  build: "threaded" | "single";
  /** The page's (or worker's) thread plus the pool's Web Workers. */
  threads: number;
  reason: string;
}
export function threads(): Threading;
/** The build of the module that runs, as the module reports it. */
export type WasmVariant = "simd128" | "simd128+relaxed-madd";
export function wasmVariant(): WasmVariant;
/** Whether this engine runs WebAssembly relaxed SIMD (validates a one-instruction probe module). */
export function relaxedSimdSupported(): boolean;
export const version: string;

export interface OpInfo {
  name: string;
  category: string;
  arity: string;
  dtypes: string[];
  attributes: { name: string; kind: string }[];
  fused: boolean;
  differentiable: boolean;
  doc: string;
}
export function ops(): OpInfo[];

/** Memory of the wasm module: linear memory (only grows) and the live Rust heap. */
export interface MemoryStats {
  wasmBytes: number;
  heapBytes: number;
  heapAllocations: number;
}
export function memoryStats(): MemoryStats;

/** How much rlx takes from its input before it refuses (docs/limits.md). */
export interface Limits {
  maxTensorBytes: number;
  maxArenaBytes: number;
  maxNestingDepth: number;
  maxFileBytes: number;
  maxThreads: number;
  maxRank: number;
}
/** The limits in force. */
export function limits(): Limits;
/** Change some limits (whole numbers >= 1); returns the limits now in force. */
export function setLimits(changes: Partial<Limits>): Limits;

export interface DeviceInfo {
  device: DeviceName;
  available: boolean;
  reason?: string;
  adapter?: {
    name: string;
    backend: string;
    driver: string;
    shader_f16: boolean;
    subgroups: boolean;
    limits: Record<string, number>;
  };
}
export function devices(): Promise<DeviceInfo[]>;

export interface ValueInfo {
  name: string;
  dtype: DType;
  shape: number[];
}

export class Tensor {
  readonly dtype: DType;
  readonly shape: number[];
  apply(op: string, others?: Tensor[], attrs?: Record<string, AttrValue>): Tensor[];
  apply1(op: string, others?: Tensor[], attrs?: Record<string, AttrValue>): Tensor;
  add(o: Tensor): Tensor;
  sub(o: Tensor): Tensor;
  mul(o: Tensor): Tensor;
  div(o: Tensor): Tensor;
  pow(o: Tensor): Tensor;
  matmul(o: Tensor): Tensor;
  relu(): Tensor;
  gelu(): Tensor;
  silu(): Tensor;
  tanh(): Tensor;
  exp(): Tensor;
  log(): Tensor;
  sqrt(): Tensor;
  sigmoid(): Tensor;
  neg(): Tensor;
  abs(): Tensor;
  softmax(axis?: number): Tensor;
  layerNorm(gamma: Tensor, beta: Tensor, eps?: number): Tensor;
  sum(axes: number[], keepdim?: boolean): Tensor;
  mean(axes: number[], keepdim?: boolean): Tensor;
  max(axes: number[], keepdim?: boolean): Tensor;
  reshape(shape: number[]): Tensor;
  permute(perm: number[]): Tensor;
  t(): Tensor;
  cast(dtype: DType): Tensor;
}

export class GraphBuilder {
  constructor(name?: string);
  /** Each dimension an integer in [0, 2^32 - 1] (else RlxError 'shape'). */
  input(name: string, dtype: DType, shape: ArrayLike<number | bigint>): Tensor;
  constant(data: TypedArray, shape: ArrayLike<number | bigint>, dtype?: DType): Tensor;
  op(name: string, inputs: Tensor[], attrs?: Record<string, AttrValue>): Tensor[];
  /** The graph; the builder is freed (later calls: RlxError 'disposed'). */
  finish(outputs: Tensor[]): Graph;
  /** Free a builder that will not be finished. Idempotent. */
  dispose(): void;
}

export class Graph {
  static fromText(text: string): Graph;
  static fromJson(json: object | string): Graph;
  /** Import an ONNX model, or a `.rten` model (its bytes begin `RTEN`); ops it cannot map are all listed in one RlxError 'unsupported'. */
  static fromOnnx(bytes: ArrayBuffer | ArrayBufferView, opts?: OnnxOptions & { externalData?: Record<string, ArrayBuffer | ArrayBufferView> }): Graph;
  /** The files an ONNX model's external-data tensors live in (relative locations): what to pass as `externalData`. */
  static onnxExternalFiles(bytes: ArrayBuffer | ArrayBufferView): string[];
  readonly name: string;
  text(): string;
  json(): any;
  inputs(): ValueInfo[];
  outputs(): ValueInfo[];
  dispose(): void;
}

export interface Progress {
  stage: "download" | "weights" | "compile" | "run" | "ready";
  loaded?: number;
  total?: number;
  message: string;
}

export class Weights {
  names(): string[];
  info(name: string): { dtype: DType; shape: number[] };
  get(name: string): OutputTensor;
  readonly bytes: number;
  /** A GGUF file's metadata (`{}` for safetensors weights). */
  metadata(): Record<string, number | boolean | string | unknown[]>;
  dispose(): void;
}
export function loadSafetensors(
  src: ArrayBuffer | ArrayBufferView | Response | URL | string,
  opts?: { onProgress?: (p: Progress) => void },
): Promise<Weights>;
/** Options of `Llm.generate` (greedy by default). */
export interface GenerateOptions {
  maxTokens?: number;
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  repetitionPenalty?: number;
  seed?: number;
  /** Generation ends at the first of these strings (not part of the output). */
  stop?: string[];
  /** End at an end-of-generation token (default true). */
  stopAtEos?: boolean;
  /** Add the model's BOS/EOS to a text prompt as the model expects (default true). */
  addSpecial?: boolean;
}
export interface GenerateStats {
  promptTokens: number;
  generated: number;
  prefillMs: number;
  decodeMs: number;
  tokensPerSecond: number;
  finishReason: "length" | "eos" | "stop" | "context";
  text: string;
  /** The graphs' mixed precision ('none' is f32). */
  amp: "none" | "f16" | "bf16";
}
/** A decoder LLM (llama, qwen2, gemma3) from a GGUF file. */
export class Llm {
  /** 'webgpu' or 'cpu': where the graphs run. */
  readonly device: "webgpu" | "cpu";
  /** The graphs' mixed precision: 'none' (f32), 'f16', 'bf16'; 'auto' until the first generation. */
  readonly amp: "auto" | "none" | "f16" | "bf16";
  readonly config: {
    name: string; architecture: string; vocabSize: number; hidden: number; layers: number; heads: number;
    kvHeads: number; headDim: number; contextLength: number; context: number; hasChatTemplate: boolean;
  };
  /** Stats of the last finished `generate`. */
  stats: GenerateStats | null;
  encode(text: string, opts?: { addSpecial?: boolean }): number[];
  decode(ids: ArrayLike<number>): string;
  chatPrompt(messages: { role: string; content: string }[], opts?: { addGenerationPrompt?: boolean }): string;
  setContext(n: number): void;
  /** The dispatch report of a decode step over `past` cached positions. */
  decodeReport(past?: number): unknown;
  generate(prompt: string | ArrayLike<number>, opts?: GenerateOptions): AsyncGenerator<{ id: number; text: string }>;
  dispose(): void;
}
export function loadLlm(
  src: ArrayBuffer | ArrayBufferView | Response | URL | string,
  opts?: {
    device?: DeviceName | DeviceName[];
    onProgress?: (p: Progress) => void;
    /** 'auto' (default): f16 activations on WebGPU where the adapter has `shader-f16`, f32 otherwise. */
    amp?: "auto" | "none" | "f16" | "bf16";
  },
): Promise<Llm>;
/** A .gguf file: every tensor (block types stay packed) and its metadata. */
export function loadGguf(
  src: ArrayBuffer | ArrayBufferView | Response | URL | string,
  opts?: { onProgress?: (p: Progress) => void },
): Promise<Weights>;

export interface CompileOptions {
  /** One device, a fallback chain such as ['webgpu', 'cpu'], or 'auto':
   * every device the page has, cheapest estimate first (the first 'auto'
   * compile calibrates unless figures were set or cleared; the report's
   * `auto` lists the estimates). */
  device?: DeviceName | DeviceName[] | "auto";
  policy?: Policy;
  /** Graph inputs with these names are bound to the weights (and kept resident). */
  weights?: Weights;
  optimize?: boolean;
  /** Mixed precision: matmuls, convolutions and attention in f16/bf16;
   * softmax, norms and reductions in f32; inputs/outputs keep their dtypes. */
  amp?: 'f16' | 'bf16' | 'none';
}

export interface OutputTensor {
  name: string;
  dtype: DType;
  shape: number[];
  /** f16: a Float16Array where the runtime has one (Chrome/Edge 135+), else Uint16Array bits. */
  data: TypedArray | ArrayBufferView;
}
export type InputValue = TypedArray | { data: TypedArray; shape?: number[] };

export type IrLevel = "hir" | "mir" | "lir";
export type KernelLang = "wgsl" | "msl" | "hlsl" | "glsl" | "spirv";

/** How an ONNX model's dynamic dimensions are bound at import. */
export interface OnnxOptions {
  /** Sizes of symbolic dimensions, by name: `{ batch: 1 }`. */
  dims?: Record<string, number>;
  /** Whole input shapes, by input name (for `?` / `-1` dimensions). */
  shapes?: Record<string, number[]>;
}

/** Where an ONNX model's external-data files come from: the files by location, or (Model.fromOnnx) an async fetch of one. */
export type ExternalData =
  | Record<string, ArrayBuffer | ArrayBufferView>
  | ((location: string) => Promise<ArrayBuffer | ArrayBufferView> | ArrayBuffer | ArrayBufferView);

export class Model {
  /** `Graph.fromOnnx(bytes, {dims, shapes, externalData})`, then `compile(graph, opts)`. */
  static fromOnnx(bytes: ArrayBuffer | ArrayBufferView, opts?: OnnxOptions & { externalData?: ExternalData } & Omit<CompileOptions, "weights">): Promise<Model>;
  readonly device: DeviceName;
  inputs(): (ValueInfo & { bound: boolean })[];
  run(inputs: Record<string, InputValue> | InputValue[]): Promise<OutputTensor[]>;
  ir(level?: IrLevel): any;
  dispatchReport(): any;
  memoryPlan(): {
    arena_bytes: number;
    peak_bytes: number;
    naive_bytes: number;
    buffers: number;
    in_place: number;
    views: number;
    steps: number;
    slots: { value: number; name?: string; dtype: DType; shape: number[]; offset: number; bytes: number; first_step: number; last_step: number }[];
    views_list: { value: number; base: number; offset: number; strides: number[] }[];
  };
  passReport(): { text: string; kernels_before: number; kernels_after: number; ops_before: Record<string, number>; ops_after: Record<string, number> } | null;
  kernels(lang?: KernelLang): { name: string; lang: string; source?: string; nodes?: number[] }[];
  dispose(): void;
}
export function compile(graph: Graph, opts?: CompileOptions): Promise<Model>;

/** What a device costs in this page (the router's figures for 'auto'). */
export interface Calibration {
  device: DeviceName;
  backend: string;
  /** f32 matrix product throughput (a 256³ product), GFLOP/s. */
  gemm_gflops: number;
  /** The cost of one more kernel in a run, µs. */
  launch_us: number;
  /** The fixed cost of a run (a one-kernel graph), µs. */
  run_us: number;
  /** Copy in and out, GB/s; null on the CPU (nothing is copied). */
  transfer_gbps: number | null;
}
/** Measure each device (default: all the page has) and use the figures for
 * `device: 'auto'`; in a browser they are kept in IndexedDB per device and
 * adapter unless `cache: false`. */
export function calibrate(opts?: { devices?: DeviceName[]; cache?: boolean }): Promise<Calibration[]>;
/** Use figures measured (or stored) elsewhere. */
export function setCalibration(figures: Calibration): void;
/** Back to the nominal figures. */
export function clearCalibrations(): void;

export const models: {
  bert(opts: {
    config: object | string;
    weights: Weights;
    batch?: number;
    seq?: number;
    device?: DeviceName | DeviceName[];
    pooling?: boolean;
    policy?: Policy;
  }): Promise<Model>;
};

export type ModelSource =
  | string
  | URL
  | {
      config: string | URL | Response | ArrayBuffer;
      tokenizer: string | URL | Response | ArrayBuffer;
      weights: string | URL | Response | ArrayBuffer | Uint8Array;
      sentenceBertConfig?: string | URL | Response | ArrayBuffer;
    };

export class Embedder {
  readonly device: DeviceName;
  embed(texts: string | string[]): Promise<Float32Array[]>;
  dispatchReport(): any;
  dispose(): void;
}

export interface EmbedOptions {
  model: ModelSource;
  device?: DeviceName | DeviceName[];
  onProgress?: (p: Progress) => void;
}

export const pipelines: {
  embed(texts: string | string[], opts: EmbedOptions): Promise<Float32Array[]>;
  createEmbedder(opts: EmbedOptions): Promise<Embedder>;
};
