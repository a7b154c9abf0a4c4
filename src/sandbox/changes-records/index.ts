export {
  appliedChangesDigest,
  changesRecordPaths,
  forgetChangesRecords,
  patchDigest,
  readDigestRecord,
  recordAppliedChanges,
  writeChangesRecord,
  type ChangesRecordPaths,
} from "./changes-records.js";
