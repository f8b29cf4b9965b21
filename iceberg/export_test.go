package iceberg

// MergeManifests is mergeManifests, for the tests.
const MergeManifests = mergeManifests
