// prom-client's default metrics one by one (lib/defaultMetrics.js requires them the same way): the package has no
// `exports` map, so these paths resolve; each registers its gauges on the registry it is given.
type PromClientDefaultMetric = (registry: import("prom-client").Registry, config?: Record<string, unknown>) => void;
declare module "prom-client/lib/metrics/processCpuTotal.js" {
  const metric: PromClientDefaultMetric;
  export default metric;
}
declare module "prom-client/lib/metrics/processStartTime.js" {
  const metric: PromClientDefaultMetric;
  export default metric;
}
declare module "prom-client/lib/metrics/osMemoryHeap.js" {
  const metric: PromClientDefaultMetric;
  export default metric;
}
declare module "prom-client/lib/metrics/processOpenFileDescriptors.js" {
  const metric: PromClientDefaultMetric;
  export default metric;
}
declare module "prom-client/lib/metrics/processMaxFileDescriptors.js" {
  const metric: PromClientDefaultMetric;
  export default metric;
}
declare module "prom-client/lib/metrics/heapSizeAndUsed.js" {
  const metric: PromClientDefaultMetric;
  export default metric;
}
