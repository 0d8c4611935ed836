"""Layouts and formats beside plain RecordIO: InsightFace's face layout
(:mod:`.insightface`; packing into it is :mod:`im2rec.packing.faces`) and
WebDataset tar shards (:mod:`.webdataset`: :mod:`.wds_export` and
:mod:`.wds_import`, over :mod:`.tars` and :mod:`.tarwriter`)."""
